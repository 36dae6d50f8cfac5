"""Human CLI output never passes a stored value's control characters to the terminal."""

from __future__ import annotations

from reactorflow.cli.output import clean


def test_control_characters_are_shown_escaped() -> None:
    hostile = "tea\x1b[2J\x1b]0;owned\x07\r\nnext\x7f"
    assert clean(hostile) == "tea\\x1b[2J\\x1b]0;owned\\x07\\x0d\\x0anext\\x7f"
    assert clean("plain text, ünïcode") == "plain text, ünïcode"
