"""`Storage.load_runs` (the storage contract, every backend, the cluster lane included): a read
of many runs by id, each as `load_run` reads it, in order, None for a missing id, writing
nothing; on Redis a batch of runs per round trip (what `reactorflow deploy-check` relies on to
read 100,000 runs in seconds)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from reactorflow.errors import CorruptRecord
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ClaimResult
from reactorflow.storage.redis.storage import LOAD_BATCH, RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import redis_namespace
from tests.storage.test_contract import OWNER, _commands_during, new_id, new_run


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


async def _filled(storage: Storage, run_id: str, index: int) -> None:
    await storage.save_step(run_id, OWNER, "a", f"rec-{index}".encode(), [f"e{index}".encode()])
    if index % 2:
        await storage.save_state(run_id, OWNER, status="paused", previous_status="running",
                                 state=f"st-{index}".encode())
        assert await storage.claim(run_id, "approve", b"payload") is ClaimResult.ACCEPTED


@pytest.mark.parametrize("history", [False, True], ids=["plain", "history+claims"])
async def test_load_runs_reads_each_run_as_load_run_does_in_order(storage: Storage,
                                                                  history: bool) -> None:
    ids = [await new_run(storage, meta=f"meta-{i}".encode()) for i in range(5)]
    for index, run_id in enumerate(ids):
        await _filled(storage, run_id, index)
    missing = new_id()
    asked = [ids[3], missing, *ids[:3], ids[4], ids[3]]

    found = await storage.load_runs(asked, history=history, claims=history)

    assert found == [None if run_id == missing else
                     await storage.load_run(run_id, history=history, claims=history)
                     for run_id in asked]
    assert found[0] is not None and found[0].steps == {"a": b"rec-3"}
    assert found[0].head.status == "paused" and found[0].head.meta == b"meta-3"
    if history:
        assert found[0].claims == {"approve": b"payload"}
        assert found[0].history is not None and found[0].history[-1] == b"e3"
    else:
        assert found[0].history is None and found[0].claims is None
    assert await storage.load_runs([]) == []


async def test_load_runs_reads_more_runs_than_a_batch_and_writes_nothing(
        storage: Storage) -> None:
    count = LOAD_BATCH + 7  # (a Redis round trip holds LOAD_BATCH runs)
    ids = list(await asyncio.gather(*(new_run(storage) for _ in range(count))))
    await storage.save_step(ids[-1], OWNER, "last", b"rec")
    before = [(await storage.load_run(r, history=True, claims=True), await storage.lock_owner(r))
              for r in ids]

    found = await storage.load_runs(ids)

    assert [s.head.run_id if s else None for s in found] == ids
    assert found[-1] is not None and found[-1].steps == {"last": b"rec"}
    after = [(await storage.load_run(r, history=True, claims=True), await storage.lock_owner(r))
             for r in ids]
    assert after == before


@pytest.fixture
async def redis_storage(redis_url: str) -> AsyncIterator[RedisStorage]:
    backend = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    try:
        yield backend
    finally:
        await backend.aclose()


async def test_redis_load_runs_reads_each_run_by_one_script_call_and_only_reads(
        redis_storage: RedisStorage, redis_url: str) -> None:
    ids = list(await asyncio.gather(*(new_run(redis_storage) for _ in range(LOAD_BATCH + 1))))
    await redis_storage.load_runs(ids[:1])  # (the script loaded)

    seen = await _commands_during(redis_url, lambda: redis_storage.load_runs(ids))

    setup = {"HELLO", "CLIENT", "SELECT"}  # (a connection's own, when one is opened)
    sent = [c["command"].split()[0].upper() for c in seen if c["client_type"] != "lua"]
    assert [name for name in sent if name not in setup] == ["EVALSHA"] * (LOAD_BATCH + 1)
    scripted = {c["command"].split()[0].upper() for c in seen if c["client_type"] == "lua"}
    assert scripted == {"HMGET", "HGETALL"}  # reads only


async def test_redis_load_runs_names_the_run_whose_key_holds_another_type(
        redis_storage: RedisStorage, redis_url: str) -> None:
    good, bad = await new_run(redis_storage), await new_run(redis_storage)
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await client.delete(redis_storage._keys.steps(bad))
        await client.set(redis_storage._keys.steps(bad), b"not a hash")
    finally:
        await client.aclose()

    with pytest.raises(CorruptRecord) as caught:
        await redis_storage.load_runs([good, bad])
    assert caught.value.run_id == bad
    assert redis_storage._keys.steps(bad) in str(caught.value)
