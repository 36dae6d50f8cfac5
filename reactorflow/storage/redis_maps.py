"""Map element slots on Redis: one hash per map step, `<ns>:map:{<run id>}:<step key>`, one
field per element index (the run's hash tag: same slot as the run's keys). A mixin of
`RedisStorage` (the contract is in `storage.base`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reactorflow.storage.base import SlotWrite

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from redis.typing import EncodableT

    from reactorflow.storage.redis_conn import RedisConnector
    from reactorflow.storage.redis_keys import RedisKeys


class RedisMaps:
    """`save_elements`, `load_elements`, `count_elements` on Redis."""

    _redis: RedisConnector
    _keys: RedisKeys
    _retention_ms: int
    _errors: Callable[[], AbstractContextManager[None]]

    async def save_elements(self, run_id: str, key: str, outcomes: Mapping[int, bytes], *,
                            replace: bool = False) -> SlotWrite | None:
        conn = await self._redis.get()
        args: list[EncodableT] = [self._retention_ms, "1" if replace else "0"]
        for index, record in outcomes.items():
            args.extend((index, record))
        with self._errors():
            reply = await conn.script("save_elements",
                                      [self._keys.run(run_id), self._keys.elements(run_id, key)],
                                      args)
        if reply == -1:
            return None
        return SlotWrite(int(reply[0]), int(reply[1]))

    async def load_elements(self, run_id: str, key: str, start: int,
                            count: int) -> list[bytes | None]:
        if count <= 0:
            return []
        conn = await self._redis.get()
        with self._errors():
            values: list[Any] = await conn.client.hmget(self._keys.elements(run_id, key),
                                                        list(range(start, start + count)))
        return [None if v is None else bytes(v) for v in values]

    async def load_element_ranges(self, run_id: str,
                                  ranges: Sequence[tuple[str, int, int]]
                                  ) -> list[list[bytes | None]]:
        conn = await self._redis.get()
        with self._errors():
            pipe = conn.client.pipeline(transaction=False)  # one slot: the run's hash tag
            for key, start, count in ranges:
                pipe.hmget(self._keys.elements(run_id, key),
                           list(range(start, start + max(count, 1))))
            replies: list[list[Any]] = await pipe.execute()
        return [[None if v is None else bytes(v) for v in reply[:max(count, 0)]]
                for reply, (_, _, count) in zip(replies, ranges, strict=True)]

    async def count_elements(self, run_id: str, key: str) -> int:
        conn = await self._redis.get()
        with self._errors():
            return int(await conn.client.hlen(self._keys.elements(run_id, key)))
