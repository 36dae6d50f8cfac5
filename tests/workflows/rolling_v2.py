"""Version 2 of the reactor `tests.rolling` (the new code of a rolling deploy): another graph,
`load`, `weigh`, `ship`, with no migration from version 1 (tests/workflows/rolling_migrating.py
adds one). Imports tests.workflows.background (through tests.workflows.rolling): a worker
subprocess takes the lane's storage and broker namespace."""

from __future__ import annotations

import reactorflow as rf
from tests.workflows import background as bg  # noqa: F401  (the lane's namespace)
from tests.workflows import rolling

flow = rf.Reactor(rolling.NAME, version=2)


@flow.step
async def load(ctx: rf.StepContext) -> str:
    rolling.step_note(2, "load", ctx)
    return "v2"


@flow.step
async def weigh(load: str, ctx: rf.StepContext) -> str:
    rolling.step_note(2, "weigh", ctx)
    return f"{load}+weigh"


@flow.step
async def ship(weigh: str, ctx: rf.StepContext) -> str:
    rolling.step_note(2, "ship", ctx)
    return f"{weigh}+ship"
