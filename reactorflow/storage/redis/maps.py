"""Map element slots on Redis: one hash per map step, `<ns>:map:{<run id>}:<step key>`, one
field per element index (the run's hash tag: same slot as the run's keys). A mixin of
`RedisStorage` (the contract is in `storage/contract/maps.py`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reactorflow.errors import LockLost, RunRecordGone
from reactorflow.storage.contract.maps import check_ranges
from reactorflow.storage.contract.values import CLOSES_MAPS, Claim, ElementStart, SlotWrite
from reactorflow.storage.redis.retry_tokens import token as _token

_CLOSING = "," + ",".join(sorted(CLOSES_MAPS)) + ","  # as the scripts match a status

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from redis.typing import EncodableT

    from reactorflow.storage.redis.connections import RedisConnector
    from reactorflow.storage.redis.keys import RedisKeys


class RedisMaps:
    """`save_elements`, `settle_element`, `load_elements`, `count_elements` on Redis."""

    _redis: RedisConnector
    _keys: RedisKeys
    _errors: Callable[[], AbstractContextManager[None]]

    async def acquire_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        raise NotImplementedError  # RedisStorage's

    async def save_elements(self, run_id: str, key: str, outcomes: Mapping[int, bytes], *,
                            replace: bool = False, owner: str | None = None
                            ) -> SlotWrite | None:
        conn = await self._redis.get()
        args: list[EncodableT] = ["1" if replace else "0", owner or ""]
        for index, record in outcomes.items():
            args.extend((index, record))
        with self._errors():
            reply = await conn.script("save_elements",
                                      [self._keys.run(run_id), self._keys.elements(run_id, key),
                                       self._keys.lock(run_id)], args)
        if reply == -1:
            return None
        if reply == -2:
            assert owner is not None
            raise LockLost(run_id, owner)
        return SlotWrite(int(reply[0]), int(reply[1]))

    async def settle_element(self, run_id: str, key: str, index: int, outcome: bytes, *,
                             control: str, stop: int | None = None,
                             advance: int | None = None,
                             claim: Claim | None = None) -> SlotWrite | None:
        conn = await self._redis.get()
        keys = [self._keys.run(run_id), self._keys.elements(run_id, key),
                self._keys.elements(run_id, control)]
        args: list[EncodableT] = [index, outcome,
                                  "" if stop is None else stop,
                                  "" if advance is None else advance, _CLOSING]
        if claim is not None:
            args.extend((claim.want, claim.window, claim.total))
        with self._errors():
            reply = await conn.script("settle_element", keys, args)
        if reply == -1:
            return None
        following, taken = int(reply[2]), int(reply[4])
        return SlotWrite(int(reply[0]), int(reply[1]), following if taken > 0 else None,
                         bool(int(reply[3])), taken)

    async def start_element(self, lock_id: str, owner: str, ttl: float, run_id: str,
                            ranges: Sequence[tuple[str, int, int]], *, starts: tuple[str, int],
                            stop: tuple[str, int]) -> ElementStart | None:
        check_ranges(ranges)  # (the script checks them too)
        conn = await self._redis.get()
        keys = [self._keys.run(run_id), self._keys.elements(run_id, starts[0]),
                self._keys.elements(run_id, stop[0]),
                *(self._keys.elements(run_id, key) for key, _, _ in ranges)]
        if conn.cluster:  # the lock is in a slot of its own: taken first, by itself
            if not await self.acquire_lock(lock_id, owner, ttl):
                return None
        else:
            keys.append(self._keys.lock(lock_id))
        args: list[EncodableT] = [starts[1], stop[1], _CLOSING, owner,
                                  max(1, round(ttl * 1000)), _token()]
        for _, start, count in ranges:
            args.extend((start, max(count, 1)))
        with self._errors():
            reply = await conn.script("start_element", keys, args)
        if reply == 0:
            return None
        reads = [[None if v is None else bytes(v) for v in found[:max(count, 0)]]
                 for found, (_, _, count) in zip(reply[1:], ranges, strict=True)]
        return ElementStart(reads, bool(int(reply[0])))

    async def refresh_elements(self, run_id: str, keys: Sequence[str]) -> None:
        if not keys:
            return
        conn = await self._redis.get()
        with self._errors():
            await conn.script("refresh_elements",  # the run's expiry (lib/expiry.lua)
                              [self._keys.run(run_id),
                               *(self._keys.elements(run_id, key) for key in keys)], [])

    async def clear_elements(self, run_id: str, owner: str, keys: Sequence[str]) -> None:
        if not keys:
            return
        conn = await self._redis.get()
        with self._errors():
            reply = await conn.script("clear_elements",
                                      [self._keys.run(run_id), self._keys.lock(run_id),
                                       *(self._keys.elements(run_id, key) for key in keys)],
                                      [owner])
        if reply == 0:
            raise LockLost(run_id, owner)
        if reply == -1:
            raise RunRecordGone(run_id, owner)

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

    async def lock_and_load_elements(self, lock_id: str, owner: str, ttl: float, run_id: str,
                                     ranges: Sequence[tuple[str, int, int]]
                                     ) -> list[list[bytes | None]] | None:
        check_ranges(ranges)  # (the script checks them too)
        conn = await self._redis.get()
        if conn.cluster:  # the lock is in a slot of its own: no script may touch both
            if not await self.acquire_lock(lock_id, owner, ttl):
                return None
            return await self.load_element_ranges(run_id, ranges)
        args: list[EncodableT] = [owner, max(1, round(ttl * 1000)), _token()]
        for _, start, count in ranges:
            args.extend((start, max(count, 1)))
        with self._errors():  # the lock first, then the reads, in one script
            reply = await conn.script(
                "lock_load_elements",
                [self._keys.lock(lock_id), *(self._keys.elements(run_id, key)
                                             for key, _, _ in ranges)], args)
        if reply == 0:
            return None
        return [[None if v is None else bytes(v) for v in reply[:max(count, 0)]]
                for reply, (_, _, count) in zip(reply[1:], ranges, strict=True)]

    async def count_elements(self, run_id: str, key: str) -> int:
        conn = await self._redis.get()
        with self._errors():
            return int(await conn.client.hlen(self._keys.elements(run_id, key)))
