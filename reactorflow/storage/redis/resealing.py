"""A key rotation's compare-and-set of a run's records in `RedisStorage` (the contract:
`storage/contract/resealing.py`): one script, `scripts/reseal_run.lua`, on the run's own keys
(its slot: `{<run id>}`), its map element slots among them."""

from __future__ import annotations

from typing import Any

from reactorflow.storage.contract.resealing import Reseal
from reactorflow.storage.redis.connections import RedisConnector


class RedisResealing:
    """`reseal_run` in Redis."""

    _redis: RedisConnector
    _keys: Any  # RedisKeys

    async def reseal_run(self, run_id: str, reseal: Reseal) -> bool:
        keys = self._keys.run_keys(run_id)
        args: list[Any] = []
        for kind, swaps in (("h", reseal.head), ("s", reseal.steps), ("c", reseal.claims)):
            for name, (old, new) in swaps.items():
                args += [kind, name, old, new]
        for map_key, slots in reseal.elements.items():
            keys.append(self._keys.elements(run_id, map_key))
            for index, (old, new) in slots.items():
                args += ["m", f"{len(keys)}:{index}", old, new]
        for old, new in reseal.events:
            args += ["e", "", old, new]
        conn = await self._redis.get()
        with self._redis.errors():
            reply = await conn.script("reseal_run", keys, args)
        return int(reply) == 1
