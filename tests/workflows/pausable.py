"""A dispatched reactor an operator pauses while its steps run in a `reactorflow worker`
subprocess (tests/workers/test_pause_workers.py). Steps note what they do, with their pid, as
tests.workflows.background's do (importing it configures the worker's namespaced storage)."""

from __future__ import annotations

import reactorflow as rf
from tests.workflows import background as bg

paused_flow = rf.Reactor("workers.pausable", always_dispatch=True)


@paused_flow.step
async def first() -> int:
    bg.note("first")
    return 1


@paused_flow.step
async def second(first: int) -> int:
    bg.note("second started")
    await bg.wait_for_gate("second")  # in flight while the test pauses the run
    bg.note("second")
    return first + 1


@paused_flow.step
async def third(second: int) -> int:
    bg.note("third")
    return second + 1
