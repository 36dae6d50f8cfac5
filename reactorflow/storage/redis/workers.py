"""The worker heartbeats of `RedisStorage` (the contract: `storage/contract/workers.py`).

Two keys in one hash slot (`{workers}`), so each script is atomic on a cluster too: the sorted
set `<ns>:{workers}:seen` (member: the worker's id, score: when its heartbeat expires, seconds)
and the hash `<ns>:{workers}:rec` (worker id -> its record). Both keys expire with the latest
heartbeat. Each operation is one script (`scripts/worker_*.lua`).
"""

from __future__ import annotations

import math
from typing import Any

from reactorflow.storage.contract.workers import PRUNE_LIMIT
from reactorflow.storage.redis.connections import RedisConnector


class RedisWorkers:
    """One heartbeat per worker, in Redis."""

    _redis: RedisConnector
    _keys: Any  # RedisKeys

    def _worker_keys(self) -> list[str]:
        base = f"{self._keys.ns}:{{workers}}"
        return [f"{base}:seen", f"{base}:rec"]

    async def _worker_script(self, script: str, args: list[Any]) -> Any:
        conn = await self._redis.get()
        with self._redis.errors():
            return await conn.script(script, self._worker_keys(), args)

    async def beat(self, worker: str, record: bytes, now: float, expires: float) -> None:
        ttl_ms = max(1, math.ceil((expires - now) * 1000))
        await self._worker_script("worker_beat", [worker, record, repr(float(expires)), ttl_ms])

    async def workers(self, now: float) -> list[bytes]:
        found = await self._worker_script("worker_list", [repr(float(now)), PRUNE_LIMIT])
        return [bytes(record) for record in found]

    async def drop_worker(self, worker: str) -> bool:
        return bool(await self._worker_script("worker_drop", [worker]) == 1)
