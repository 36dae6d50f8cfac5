"""Everything a storage holds, to check that a read wrote nothing: on Redis every key of the
storage's namespace (its DUMP, and whether it has an expiry), in MemoryStorage every record it
keeps (a deep copy of its tables)."""

from __future__ import annotations

import copy
from typing import Any

import redis.asyncio

import reactorflow as rf

_MEMORY_MACHINERY = frozenset({"_mutex", "_subscribers", "_ops", "_timer_seq", "_heartbeats"})
"""MemoryStorage attributes that are not records (its lock, waiters, counters of operations
and of timers: an `itertools.count` compares by identity), and the worker heartbeats (a worker
of this process beats on its own clock, whatever the read under test does)."""
HEARTBEAT_KEYS = ":{workers}:"
"""The part of a Redis key name that marks the worker heartbeats (left out, as above)."""


async def image(storage: rf.Storage, redis_url: str | None = None) -> dict[str, Any]:
    """A snapshot of everything `storage` holds (`redis_url`: the server of a RedisStorage)."""
    if isinstance(storage, rf.MemoryStorage):
        return {name: copy.deepcopy(value) for name, value in vars(storage).items()
                if name not in _MEMORY_MACHINERY}
    assert isinstance(storage, rf.RedisStorage) and redis_url is not None
    return await redis_image(redis_url, storage._keys.ns)


async def redis_image(redis_url: str, namespace: str) -> dict[str, Any]:
    """Every key of `namespace` on the Redis at `redis_url`: its DUMP, and whether it expires."""
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        found: dict[str, Any] = {}
        async for key in client.scan_iter(match=f"{namespace}:*", count=1000):
            if HEARTBEAT_KEYS in key.decode():
                continue
            found[key.decode()] = (await client.dump(key), await client.pttl(key) > 0)
        return found
    finally:
        await client.aclose()
