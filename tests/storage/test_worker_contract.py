"""Worker heartbeats in the storage contract, on every backend (memory, Redis, and the Redis
Cluster of the cluster lane): one record per worker, replaced by each beat, gone (and removed)
once its expiry passed, dropped by a worker that stops."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import anyio
import pytest

import reactorflow as rf
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.workers import PRUNE_LIMIT
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


def worker_id() -> str:
    return f"host:{uuid.uuid4().hex[:8]}"


async def test_a_beat_is_listed_until_its_expiry_and_replaced_by_the_next(
        storage: Storage) -> None:
    w = worker_id()
    await storage.beat(w, b"first", 100.0, 115.0)
    assert await storage.workers(100.0) == [b"first"]
    await storage.beat(w, b"second", 105.0, 120.0)  # one record per worker
    assert await storage.workers(119.5) == [b"second"]
    assert await storage.workers(120.0) == []  # expired: gone


async def test_an_expired_heartbeat_is_removed_not_only_hidden(storage: Storage) -> None:
    dead, alive = worker_id(), worker_id()
    await storage.beat(dead, b"dead", 100.0, 115.0)
    await storage.beat(alive, b"alive", 100.0, 1_000.0)
    assert sorted(await storage.workers(200.0)) == [b"alive"]
    # read "earlier" again: the dead one's record is no longer stored at all
    assert sorted(await storage.workers(101.0)) == [b"alive"]
    assert await storage.drop_worker(dead) is False


async def test_a_worker_that_stops_drops_its_heartbeat(storage: Storage) -> None:
    w, other = worker_id(), worker_id()
    await storage.beat(w, b"w", 10.0, 25.0)
    await storage.beat(other, b"other", 10.0, 25.0)
    assert await storage.drop_worker(w) is True
    assert await storage.drop_worker(w) is False
    assert await storage.workers(11.0) == [b"other"]


async def test_pruning_is_bounded_per_call_and_finishes_on_later_calls(storage: Storage) -> None:
    dead = [worker_id() for _ in range(PRUNE_LIMIT + 5)]
    for w in dead:
        await storage.beat(w, w.encode(), 1.0, 2.0)
    assert await storage.workers(3.0) == []  # none listed, even those not yet removed
    assert await storage.workers(3.0) == []
    assert [await storage.drop_worker(w) for w in dead] == [False] * len(dead)


async def test_concurrent_beats_of_many_workers_are_all_listed(storage: Storage) -> None:
    ids = [worker_id() for _ in range(20)]

    async def beat(w: str) -> None:
        for n in range(3):
            await storage.beat(w, f"{w}#{n}".encode(), 50.0 + n, 80.0 + n)

    async with anyio.create_task_group() as tg:
        for w in ids:
            tg.start_soon(beat, w)
    assert sorted(await storage.workers(60.0)) == sorted(f"{w}#2".encode() for w in ids)


@pytest.mark.parametrize("bad", [0, -1.5, "5", True, float("nan"), float("inf")])
@pytest.mark.parametrize("option", ["heartbeat_interval", "lock_ttl", "park_after"])
def test_a_bad_seconds_setting_is_refused_naming_the_option(option: str, bad: object) -> None:
    """Every seconds setting, the heartbeat's too: a NaN or an infinity is refused as well."""
    before = rf.configure()
    with pytest.raises(rf.ConfigurationError, match=option) as refused:
        rf.configure(**{option: bad})
    assert refused.value.option == option
    assert rf.configure() == before  # nothing changed


async def test_redis_heartbeat_keys_expire_with_the_latest_heartbeat(storage: Storage) -> None:
    """Two keys in one slot; a namespace whose workers are all gone loses them by itself."""
    if not isinstance(storage, RedisStorage):
        pytest.skip("the Redis keys")
    await storage.beat(worker_id(), b"long", 100.0, 160.0)  # 60 s to live
    await storage.beat(worker_id(), b"short", 100.0, 115.0)  # a shorter one does not cut it
    client = (await storage._redis.get()).client
    keys = storage._worker_keys()
    assert len({key.split("{", 1)[1].split("}", 1)[0] for key in keys}) == 1  # one hash tag
    for key in keys:
        assert 55_000 < await client.pttl(key) <= 60_000, key
