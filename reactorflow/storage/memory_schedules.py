"""The schedule primitives of `MemoryStorage` (see the schedules section of `storage/base.py`).

Mixed into `MemoryStorage`: every method runs under its one mutex, so each is atomic.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from reactorflow.storage.base import ScheduleState


class MemorySchedules:
    """Schedule cursors, pause flags and last outcomes, in memory."""

    _mutex: threading.Lock
    _schedules: dict[str, ScheduleState]

    def _init_schedules(self) -> None:
        self._schedules = {}

    async def schedule_load(self, key: str, start: int | None) -> ScheduleState | None:
        with self._mutex:
            state = self._schedules.get(key)
            if state is None and start is not None:
                state = self._schedules[key] = ScheduleState(cursor=start)
            return state

    async def schedule_advance(self, key: str, expected: int, cursor: int) -> bool:
        with self._mutex:
            state = self._schedules.get(key)
            if state is None or state.paused or state.cursor != expected:
                return False
            self._schedules[key] = replace(state, cursor=cursor)
            return True

    async def schedule_record(self, key: str, *, last_run: str = "", error: str = "") -> None:
        with self._mutex:
            state = self._schedules.get(key)
            if state is not None:
                self._schedules[key] = replace(state, last_run=last_run or state.last_run,
                                               error=error)

    async def schedule_pause(self, key: str, paused: bool, now: int) -> bool:
        with self._mutex:
            state = self._schedules.get(key) or ScheduleState(cursor=now)
            changed = state.paused != paused
            cursor = state.cursor if paused else max(state.cursor, now)
            self._schedules[key] = replace(state, paused=paused, cursor=cursor)
            return changed
