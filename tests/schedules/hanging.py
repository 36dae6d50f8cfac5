"""A scheduled reactor for the scheduler-kill test (imported by its subprocesses).

With REACTORFLOW_TEST_HANG_AFTER_CLAIM naming a file, the process's scheduler hangs right after
it claims a tick of `sched-killed` (the claim's atomic write done, the run not started),
having written the tick (ms) to that file: the test kills it there with SIGKILL.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

import msgspec

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
from tests.workflows import background  # noqa: F401 - in a subprocess given

# REACTORFLOW_TEST_NAMESPACE, it confines storage and broker to the test's namespace

HANG_ENV = "REACTORFLOW_TEST_HANG_AFTER_CLAIM"
KEY = "sched-killed:0"


class Tick(msgspec.Struct):
    at: str


def at_tick(tick: datetime) -> Tick:
    return Tick(at=tick.isoformat())


killed = rf.Reactor("sched-killed", inputs=Tick,
                    schedules=[rf.Schedule("* * * * *", inputs=at_tick)])


@killed.step
async def note(at: str) -> str:
    return at


if os.environ.get(HANG_ENV):
    marker = Path(os.environ[HANG_ENV])
    claim = RedisStorage.schedule_advance

    async def claim_then_hang(self: RedisStorage, key: str, expected: int, cursor: int,
                              lease: int = 0) -> bool:
        moved = await claim(self, key, expected, cursor, lease)
        if moved and key == KEY:
            marker.write_text(str(cursor))
            while True:  # the whole process stops here (the event loop blocked): killed
                time.sleep(3600)
        return moved

    RedisStorage.schedule_advance = claim_then_hang  # type: ignore[method-assign]
