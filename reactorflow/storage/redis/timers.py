"""The timers of `RedisStorage` (the contract: `storage/contract/timers.py`).

Two keys in one hash slot (`{timers}`), so each script is atomic on a cluster too: the sorted
set `<ns>:{timers}:due` (member: the run id, score: when it falls due, seconds) and the hash
`<ns>:{timers}:run` (run id -> "<due as armed>|<reactor>|<version>"; a timer armed before
versions has no version: 1). No TTL: a timer lives until it is
fired or disarmed (api.md §13). Each operation is one script (`scripts/timer_*.lua`); claiming
reads only the due members (`ZRANGEBYSCORE ... LIMIT`).
"""

from __future__ import annotations

from typing import Any

from reactorflow.storage.contract.values import DueTimer
from reactorflow.storage.redis.connections import RedisConnector


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisTimers:
    """One timer per run, in Redis."""

    _redis: RedisConnector
    _keys: Any  # RedisKeys

    def _timer_keys(self) -> list[str]:
        base = f"{self._keys.ns}:{{timers}}"
        return [f"{base}:due", f"{base}:run"]

    async def _timer_script(self, script: str, args: list[Any]) -> Any:
        conn = await self._redis.get()
        with self._redis.errors():
            return await conn.script(script, self._timer_keys(), args)

    async def arm_timer(self, run_id: str, reactor: str, due: float, version: int = 1) -> None:
        await self._timer_script("timer_arm", [run_id, repr(float(due)), f"{reactor}|{version}"])

    async def disarm_timer(self, run_id: str, due: float | None = None) -> bool:
        removed = await self._timer_script("timer_disarm",
                                           [run_id, "" if due is None else repr(float(due))])
        return bool(removed == 1)

    async def claim_timers(self, now: float, lease: float, limit: int) -> list[DueTimer]:
        leased_until = now + lease
        flat = await self._timer_script("timer_claim",
                                        [repr(float(now)), repr(leased_until), int(limit)])
        claimed = []
        for run, details in zip(flat[::2], flat[1::2], strict=True):
            due, _, rest = _text(details).partition("|") if details else ("", "", "")
            reactor, _, version = rest.partition("|")
            claimed.append(DueTimer(_text(run), reactor, float(due) if due else now,
                                    leased_until, int(version) if version.isdigit() else 1))
        return claimed

    async def next_timer(self) -> float | None:
        conn = await self._redis.get()
        with self._redis.errors():
            first = await conn.client.zrange(self._timer_keys()[0], 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    async def timer_of(self, run_id: str) -> float | None:
        conn = await self._redis.get()
        with self._redis.errors():
            score = await conn.client.zscore(self._timer_keys()[0], run_id)
        return None if score is None else float(score)
