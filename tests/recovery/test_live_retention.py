"""Retention never drops live work (api.md §13), end to end: a run paused at an interrupt long
past the storage's retention, after a map, keeps its record, its map's element slots and its
correlation id, and resumes; its retention starts when it ends. (tests/storage/test_retention.py
checks the storage rule part by part on every backend.)"""

from __future__ import annotations

import time

import anyio
import msgspec

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.testing import Environment
from tests.helpers import configured, redis_namespace, unique


class Order(msgspec.Struct):
    order_id: str
    items: list[int]


def _approval_flow() -> rf.Reactor:
    flow = rf.Reactor(unique("approval"), inputs=Order)

    @flow.map_step(over="items")
    async def priced(item: int) -> int:
        return item * 10

    @flow.interrupt(correlation_id="order:{order_id}", timeout=30 * 86_400)
    async def approve(payload: bool, priced: list[int]) -> bool:
        return payload

    @flow.step
    async def total(priced: list[int], approve: bool) -> int:
        return sum(priced) if approve else 0

    return flow


async def test_memory_a_paused_run_outlives_retention_and_resumes() -> None:
    """`MemoryStorage(retention=1)` dropped a paused run a second after its last write."""
    async with Environment(storage=rf.MemoryStorage(retention=1)) as env:
        flow = _approval_flow()
        paused = await flow.run(order_id="A1", items=[1, 2, 3])
        assert paused.status is rf.Status.PAUSED
        await env.clock.advance(10 * 86_400)  # ten days: its interrupt's timeout is later
        await rf.sweep_once()

        done = await flow.continue_by_correlation_id("order:A1", step="approve", payload=True)
        assert done.status is rf.Status.COMPLETED, done.error
        assert done.value == 60
        assert await env.storage.count_elements(paused.id, "priced") == 3

        await env.clock.advance(2)  # ended: its retention has run out
        assert await env.storage.load_head(paused.id) is None
        assert await env.storage.count_elements(paused.id, "priced") == 0


async def test_redis_a_paused_runs_keys_carry_no_ttl_and_it_resumes_past_retention(
        redis_url: str) -> None:
    """Redis set a TTL of `retention` on every write: a paused run's keys expired with it."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace("live"), retention=1)
    async with configured(storage):
        flow = _approval_flow()
        paused = await flow.run(order_id="B2", items=[1, 2])
        assert paused.status is rf.Status.PAUSED
        client = (await storage._redis.get()).client
        keys = [k async for k in client.scan_iter(match=f"{storage._keys.ns}:*")]
        owned = [k for k in keys if f"{{{paused.id}}}".encode() in k or b":corr:" in k]
        assert any(b":map:" in k for k in owned) and any(b":corr:" in k for k in owned), owned
        for key in owned:  # none expires: no TTL at all
            assert await client.pttl(key) == -1, key
        moment = time.monotonic()  # past the retention (1 s), for real
        while time.monotonic() < moment + 1.5:
            await anyio.sleep(0.05)

        done = await flow.continue_by_correlation_id("order:B2", step="approve", payload=True)
        assert done.status is rf.Status.COMPLETED, done.error
        assert done.value == 30
        for key in [k for k in owned if b":corr:" not in k and b":lock:" not in k]:
            ttl = await client.pttl(key)  # ended: every part expires within the retention
            assert 0 < ttl <= 1000, (key, ttl)


async def test_memory_a_start_replayed_past_retention_finds_its_paused_run() -> None:
    """The idempotency claim expired `retention` after the start: the same start replayed
    while the run waited at its interrupt created a second run for the same order."""
    async with Environment(storage=rf.MemoryStorage(retention=1)) as env:
        flow = _approval_flow()
        paused = await flow.run(order_id="C3", items=[1], idempotency_key="order-C3")
        assert paused.status is rf.Status.PAUSED
        await env.clock.advance(10 * 86_400)

        again = await flow.run(order_id="C3", items=[1], idempotency_key="order-C3")
        assert again.replayed and again.id == paused.id

        done = await flow.continue_(paused.id, step="approve", payload=True)
        assert done.status is rf.Status.COMPLETED, done.error
        await env.clock.advance(2)  # ended: the claim's retention has run out with the run's
        fresh = await flow.run(order_id="C3", items=[1], idempotency_key="order-C3")
        assert not fresh.replayed and fresh.id != paused.id


async def test_redis_a_start_replayed_past_retention_finds_its_paused_run(
        redis_url: str) -> None:
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace("live"), retention=1)
    async with configured(storage):
        flow = _approval_flow()
        paused = await flow.run(order_id="D4", items=[1], idempotency_key="order-D4")
        assert paused.status is rf.Status.PAUSED
        client = (await storage._redis.get()).client
        claim = storage._keys.idempotency(flow.name, "order-D4")
        assert await client.pttl(claim) == -1  # no TTL while the run lives
        moment = time.monotonic()  # past the retention (1 s), for real
        while time.monotonic() < moment + 1.5:
            await anyio.sleep(0.05)

        again = await flow.run(order_id="D4", items=[1], idempotency_key="order-D4")
        assert again.replayed and again.id == paused.id

        done = await flow.continue_(paused.id, step="approve", payload=True)
        assert done.status is rf.Status.COMPLETED, done.error
        assert 0 < await client.pttl(claim) <= 1000  # ended: it expires with the run
