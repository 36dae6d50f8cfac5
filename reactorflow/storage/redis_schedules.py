"""The schedule primitives of `RedisStorage` (see the schedules section of `storage/base.py`).

Each operation is one Lua script (one file each in `scripts/`, with its KEYS/ARGV header) over
the schedule's one hash, `<ns>:schedule:{s:<digest of the schedule key>}` (fields `cursor`,
`paused`, `last_run`, `error`; no TTL: a schedule is kept while it is declared). Cursors are
integer milliseconds, compared as the exact text the caller read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from reactorflow.storage.base import ScheduleState
from reactorflow.storage.redis_conn import RedisConnector


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


class RedisSchedules:
    """Schedule cursors, pause flags and last outcomes, in Redis."""

    _redis: RedisConnector
    _keys: Any  # RedisKeys

    def _schedule(self, key: str) -> str:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"{self._keys.ns}:schedule:{{s:{digest}}}"

    async def _schedule_script(self, script: str, key: str, args: Sequence[Any]) -> Any:
        conn = await self._redis.get()
        with self._redis.errors():
            return await conn.script(script, [self._schedule(key)], args)

    async def schedule_load(self, key: str, start: int | None) -> ScheduleState | None:
        found = await self._schedule_script("schedule_load", key,
                                            ["" if start is None else int(start)])
        if found is None:
            return None
        cursor, paused, last_run, error = (_text(v) for v in found)
        return ScheduleState(cursor=int(cursor), paused=paused == "1", last_run=last_run,
                             error=error)

    async def schedule_advance(self, key: str, expected: int, cursor: int) -> bool:
        moved = await self._schedule_script("schedule_advance", key,
                                            [int(expected), int(cursor)])
        return bool(moved == 1)

    async def schedule_record(self, key: str, *, last_run: str = "", error: str = "") -> None:
        await self._schedule_script("schedule_record", key, [last_run, error])

    async def schedule_pause(self, key: str, paused: bool, now: int) -> bool:
        changed = await self._schedule_script("schedule_pause", key,
                                              ["1" if paused else "0", int(now)])
        return bool(changed == 1)
