"""The schedule primitives of `RedisStorage` (the contract: `storage/contract/schedules.py`).

Each operation is one Lua script (one file each in `scripts/`, with its KEYS/ARGV header) over
the schedule's hash, `<ns>:schedule:{s:<digest of the schedule key>}` (fields `cursor`,
`paused`, `last_run`, `error`), and its pending ticks, the sorted set `<that key>:pending`
(member: the tick in ms, score: its lease expiry in ms); both in one hash slot, so each script
is atomic on a cluster too. No TTL: a schedule is kept while it is declared. Cursors are
integer milliseconds, compared as the exact text the caller read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from reactorflow.storage.contract.values import ScheduleState
from reactorflow.storage.redis.connections import RedisConnector


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


class RedisSchedules:
    """Schedule cursors, pause flags and last outcomes, in Redis."""

    _redis: RedisConnector
    _keys: Any  # RedisKeys

    def _schedule(self, key: str) -> str:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"{self._keys.ns}:schedule:{{s:{digest}}}"

    async def _schedule_script(self, script: str, key: str, args: Sequence[Any], *,
                               parts: Sequence[str] = ("", ":pending")) -> Any:
        """Run `script` on the schedule's keys: `parts` ("" the hash, ":pending" its ticks)."""
        conn = await self._redis.get()
        keys = [f"{self._schedule(key)}{part}" for part in parts]
        with self._redis.errors():
            return await conn.script(script, keys, args)

    async def schedule_load(self, key: str, start: int | None) -> ScheduleState | None:
        found = await self._schedule_script("schedule_load", key,
                                            ["" if start is None else int(start)])
        if found is None:
            return None
        cursor, paused, last_run, error = (_text(v) for v in found[:4])
        flat = [int(float(_text(v))) for v in found[4]]
        pending = tuple(sorted(zip(flat[::2], flat[1::2], strict=True)))
        return ScheduleState(cursor=int(cursor), paused=paused == "1", last_run=last_run,
                             error=error, pending=pending)

    async def schedule_advance(self, key: str, expected: int, cursor: int,
                               lease: int = 0) -> bool:
        moved = await self._schedule_script("schedule_advance", key,
                                            [int(expected), int(cursor), int(lease)])
        return bool(moved == 1)

    async def schedule_record(self, key: str, *, last_run: str = "", error: str = "",
                              tick: int | None = None) -> None:
        await self._schedule_script("schedule_record", key,
                                    [last_run, error, "" if tick is None else int(tick)])

    async def schedule_relet(self, key: str, tick: int, expected: int, lease: int) -> bool:
        won = await self._schedule_script("schedule_relet", key,
                                          [int(tick), int(expected), int(lease)],
                                          parts=(":pending",))
        return bool(won == 1)

    async def schedule_pause(self, key: str, paused: bool, now: int) -> bool:
        changed = await self._schedule_script("schedule_pause", key,
                                              ["1" if paused else "0", int(now)], parts=("",))
        return bool(changed == 1)
