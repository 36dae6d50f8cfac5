"""An interrupt's `when=` (docs/interrupts.md: "`name`, `when` and `after` work as for steps")."""

from __future__ import annotations

import msgspec

import reactorflow as rf
from tests.helpers import unique


class Mode(msgspec.Struct):
    mode: str


def _flow() -> rf.Reactor:
    flow = rf.Reactor(unique("interrupt-when"), inputs=Mode)

    @flow.step
    async def work(mode: str) -> str:
        return mode

    @flow.interrupt(when=lambda mode: mode == "pause")
    async def gate(payload: str, work: str, mode: str) -> str:
        return payload

    @flow.step
    async def end(work: str, gate: str = "no gate") -> str:
        return f"{work}/{gate}"

    return flow


async def test_interrupt_whose_condition_holds_pauses(storage: rf.Storage) -> None:
    flow = _flow()
    run = await flow.run(mode="pause")
    assert run.status is rf.Status.PAUSED and run.waiting_on == ["gate"]
    done = await flow.continue_(run.id, step="gate", payload="ok")
    assert done.status is rf.Status.COMPLETED and done.value == "pause/ok"


async def test_interrupt_whose_condition_is_false_is_skipped(storage: rf.Storage) -> None:
    flow = _flow()
    run = await flow.run(mode="complete")
    assert run.status is rf.Status.COMPLETED, (run.status, run.waiting_on)
    assert run.steps["gate"].status == "skipped"
    assert run.value == "complete/no gate"
