"""Values given on the command line: JSON (inline or `@path` of a file) and step names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import msgspec


def json_value(text: str, option: str) -> Any:
    """The JSON value `text` gives for `option`: the JSON itself, or `@path` of a JSON file.

    Raises:
        click.BadParameter: the file cannot be read, or the text is not JSON (exit status 2,
            naming `option`).
    """
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise click.BadParameter(f"cannot read {path}: {exc.strerror}",
                                     param_hint=option) from exc
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=option) from exc


def step_path(step: str) -> str | tuple[str, ...]:
    """A step as the command line names it: a root step by its name, a nested one as a path
    of names joined with `/` (`fulfil/approve`)."""
    return tuple(step.split("/")) if "/" in step else step
