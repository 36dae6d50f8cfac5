"""A scheduled reactor the CLI and scheduler-process tests operate on (imported by their
subprocesses)."""

from __future__ import annotations

from datetime import datetime

import msgspec

import reactorflow as rf
from tests.workflows import background  # noqa: F401 - in a subprocess given

# REACTORFLOW_TEST_NAMESPACE, it confines storage and broker to the test's namespace


class Tick(msgspec.Struct):
    at: str


def at_tick(tick: datetime) -> Tick:
    return Tick(at=tick.isoformat())


minutely = rf.Reactor("sched-minutely", inputs=Tick, schedules=[
    rf.Schedule("* * * * *", inputs=at_tick, catch_up="all", name="every-minute"),
    rf.Schedule("0 2 * * *", timezone="Europe/Madrid", inputs={"at": "nightly"}),
])


@minutely.step
async def note(at: str) -> str:
    return at
