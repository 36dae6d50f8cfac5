"""Human CLI output never passes a stored value's control characters to the terminal, and shows
a deadline only for an interrupt the run still waits on."""

from __future__ import annotations

import pytest
from dramatiq.brokers.stub import StubBroker

import reactorflow as rf
from reactorflow.cli.output import clean, show_run
from tests.helpers import unique


def test_control_characters_are_shown_escaped() -> None:
    hostile = "tea\x1b[2J\x1b]0;owned\x07\r\nnext\x7f"
    assert clean(hostile) == "tea\\x1b[2J\\x1b]0;owned\\x07\\x0d\\x0anext\\x7f"
    assert clean("plain text, ünïcode") == "plain text, ünïcode"


async def test_an_answered_interrupt_shows_no_deadline(storage: rf.Storage,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    rf.configure(broker=StubBroker())  # the background resume waits for a worker: none runs
    flow = rf.Reactor(unique("answered"))

    @flow.interrupt(timeout=3600, resume="background")
    async def approve(payload: bool) -> bool:
        return payload

    @flow.interrupt(timeout=60)
    async def confirm(payload: bool) -> bool:
        return payload

    paused = await flow.run()
    assert paused.timeout_at is not None
    show_run(paused, as_json=False)
    assert "times out" in capsys.readouterr().out
    first = await flow.continue_(paused.id, step="confirm", payload=True)  # the earlier one
    assert first.status is rf.Status.PAUSED and first.waiting_on == ["approve"]
    assert first.timeout_at is not None and first.timeout_at > paused.timeout_at
    resumed = await flow.continue_(paused.id, step="approve", payload=True)
    assert resumed.status is rf.Status.RUNNING and resumed.waiting_on == []
    for run in (resumed, await flow.get(paused.id), await rf.get_run(paused.id)):
        assert run.timeout_at is None
        show_run(run, as_json=False)
        assert "times out" not in capsys.readouterr().out
