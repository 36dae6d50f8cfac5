"""Version 1 of the reactor `tests.rolling` (the old code of a rolling deploy): `fetch`, then
`pack`. Its hand-off point after `fetch` lets a test start a run here (fetch runs in the
caller) and leave the rest to a worker. Imports tests.workflows.background (through
tests.workflows.rolling): a worker subprocess takes the lane's storage and broker namespace."""

from __future__ import annotations

import reactorflow as rf
from tests.workflows import background as bg  # noqa: F401  (the lane's namespace)
from tests.workflows import rolling

flow = rf.Reactor(rolling.NAME, version=1)


@flow.step
async def fetch(ctx: rf.StepContext) -> str:
    rolling.step_note(1, "fetch", ctx)
    return "v1"


@flow.step
async def pack(fetch: str, ctx: rf.StepContext) -> str:
    rolling.step_note(1, "pack", ctx)
    return f"{fetch}+pack"


flow.background(after="fetch")
