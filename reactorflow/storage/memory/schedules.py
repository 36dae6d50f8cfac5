"""The schedule primitives of `MemoryStorage` (the contract: `storage/contract/schedules.py`).

Mixed into `MemoryStorage`: every method runs under its one mutex, so each is atomic.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from reactorflow.storage.contract.values import ScheduleState


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

    async def schedule_advance(self, key: str, expected: int, cursor: int,
                               lease: int = 0) -> bool:
        with self._mutex:
            state = self._schedules.get(key)
            if state is None or state.paused or state.cursor != expected:
                return False
            pending = _pending(state, cursor, lease) if lease else state.pending
            self._schedules[key] = replace(state, cursor=cursor, pending=pending)
            return True

    async def schedule_record(self, key: str, *, last_run: str = "", error: str = "",
                              tick: int | None = None) -> None:
        with self._mutex:
            state = self._schedules.get(key)
            if state is not None:
                pending = tuple(p for p in state.pending if p[0] != tick)
                self._schedules[key] = replace(state, last_run=last_run or state.last_run,
                                               error=error, pending=pending)

    async def schedule_relet(self, key: str, tick: int, expected: int, lease: int) -> bool:
        with self._mutex:
            state = self._schedules.get(key)
            if state is None or (tick, expected) not in state.pending:
                return False
            self._schedules[key] = replace(state, pending=_pending(state, tick, lease))
            return True

    async def schedule_pause(self, key: str, paused: bool, now: int) -> bool:
        with self._mutex:
            state = self._schedules.get(key) or ScheduleState(cursor=now)
            changed = state.paused != paused
            cursor = state.cursor if paused else max(state.cursor, now)
            self._schedules[key] = replace(state, paused=paused, cursor=cursor)
            return changed


def _pending(state: ScheduleState, tick: int, lease: int) -> tuple[tuple[int, int], ...]:
    """`state`'s pending ticks with `tick` leased until `lease`, oldest tick first."""
    return tuple(sorted({**dict(state.pending), tick: lease}.items()))
