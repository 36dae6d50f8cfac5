"""Waiting costs no pool connection: every waiter of a process shares one subscriber connection
per event loop (issue 8, defect 29), and an exhausted pool says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
import redis.asyncio

import reactorflow as rf
from reactorflow.definition.graph import plan_for
from reactorflow.runtime.engine.ownership import new_owner
from reactorflow.runtime.ops.creation import create_run
from reactorflow.runtime.ops.operations import new_run_id, run_owned
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import configured, redis_namespace, unique

WAITERS = 1000
POOL = 8  # connections per event loop: far fewer than waiters


@pytest.fixture(params=["memory", "redis"])
async def small_pool(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    backend: rf.Storage
    if request.param == "memory":
        backend = MemoryStorage()
    else:
        backend = RedisStorage.from_url(request.getfixturevalue("redis_url"),
                                        namespace=redis_namespace(), max_connections=POOL,
                                        pool_timeout=5.0)
    async with configured(backend):
        yield backend


async def _subscribed(storage: rf.Storage, redis_url: str | None) -> int:
    """How many run channels have a subscriber now (the server's view on Redis)."""
    if isinstance(storage, MemoryStorage):
        return len(storage._subscribers)
    assert isinstance(storage, RedisStorage) and redis_url is not None
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        return len(await client.pubsub_channels(f"{storage._keys.ns}:done:*"))
    finally:
        await client.aclose()


@pytest.mark.slow
async def test_a_thousand_waiters_in_one_process(small_pool: rf.Storage,
                                                 request: pytest.FixtureRequest) -> None:
    storage = small_pool
    redis_url = (request.getfixturevalue("redis_url") if isinstance(storage, RedisStorage)
                 else None)
    flow = rf.Reactor(unique("waited"))

    @flow.step
    async def only(ctx: rf.StepContext) -> str:
        return ctx.run_id

    other = rf.Reactor(unique("meanwhile"))

    @other.step
    async def quick() -> int:
        return 7

    owners: dict[str, str] = {}
    for _ in range(WAITERS):  # stored, running, and left alone until the waiters wait
        run_id, owner = new_run_id(), new_owner()
        await create_run(storage, flow, plan_for(flow), run_id, None, owner)
        owners[run_id] = owner

    results: dict[str, rf.Run] = {}

    async def waiter(run_id: str) -> None:
        results[run_id] = await flow.wait(run_id, timeout=300)

    with anyio.fail_after(300):
        async with anyio.create_task_group() as tg:
            for run_id in owners:
                tg.start_soon(waiter, run_id)
            while await _subscribed(storage, redis_url) < WAITERS:
                await anyio.sleep(0.05)

            # every waiter waits; the pool still serves other calls, many at once
            snapshots: list[rf.Run] = []

            async def read(run_id: str) -> None:
                snapshots.append(await flow.get(run_id))

            async with anyio.create_task_group() as readers:
                for run_id in list(owners)[:200]:
                    readers.start_soon(read, run_id)
            assert len(snapshots) == 200
            assert all(s.status is rf.Status.RUNNING for s in snapshots)
            done = await other.run()
            assert done.status is rf.Status.COMPLETED and done.value == 7
            assert results == {}

            async def finish(run_id: str, limit: anyio.Semaphore) -> None:
                async with limit:
                    await run_owned(flow, storage, run_id, owners[run_id])

            limit = anyio.Semaphore(POOL)
            async with anyio.create_task_group() as finishers:
                for run_id in owners:
                    finishers.start_soon(finish, run_id, limit)

    assert len(results) == WAITERS
    assert all(run.status is rf.Status.COMPLETED and run.value == run_id
               for run_id, run in results.items())
    assert await _subscribed(storage, redis_url) == 0  # every waiter unsubscribed


async def test_an_exhausted_pool_is_reported_as_such(redis_url: str) -> None:
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace(), max_connections=1,
                                    pool_timeout=0.5)
    try:
        conn = await storage._redis.get()
        async with anyio.create_task_group() as tg:
            # the pool's one connection is busy with a blocking command for a while
            tg.start_soon(conn.client.blpop, [f"{storage._keys.ns}:nothing"], 3)
            await anyio.sleep(0)
            with pytest.raises(rf.StoragePoolExhausted) as info:
                await storage.load_head("some-run")
            tg.cancel_scope.cancel()
        error = info.value
        assert error.max_connections == 1 and error.waited == 0.5
        message = str(error)
        assert "all 1 connections of this process's pool" in message
        assert "max_connections=" in message
        assert "Check that the server is running" not in message
        assert isinstance(error, rf.StorageError)
    finally:
        await storage.aclose()


@asynccontextmanager
async def _on_redis(redis_url: str) -> AsyncIterator[tuple[RedisStorage, redis.asyncio.Redis]]:
    """A configured RedisStorage of its own namespace, and a plain client beside it."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        async with configured(storage):
            yield storage, client
    finally:
        await client.aclose()


class _WriteCount:
    """A view of a connection's stream writer that counts the writes made through it."""

    def __init__(self, writer: object) -> None:
        self._writer = writer
        self.writes = 0

    def writelines(self, data: object) -> None:
        self.writes += 1
        self._writer.writelines(data)  # type: ignore[attr-defined]

    def write(self, data: object) -> None:
        self.writes += 1
        self._writer.write(data)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._writer, name)


async def test_a_waiter_leaving_its_channel_writes_nothing_on_its_way(redis_url: str) -> None:
    """The last waiter of a channel goes on without writing its UNSUBSCRIBE (a waiter handed a
    gate goes straight to its run's first step); the loop writes it on its next turn, and the
    server drops the channel."""
    async with _on_redis(redis_url) as (storage, client):
        left = storage._gate("left-soon")
        async with storage.subscribe_gate("left-soon"):
            mux = (await storage._redis.get()).mux
            assert mux is not None and mux._pubsub.connection is not None
            connection = mux._pubsub.connection
            counted = _WriteCount(connection._writer)
            connection._writer = counted  # type: ignore[assignment]
        assert counted.writes == 0  # left, and nothing written on its way
        await anyio.sleep(0)  # the loop's next turn
        assert counted.writes == 1
        with anyio.fail_after(10):
            while await client.pubsub_channels(left) != []:
                await anyio.sleep(0.01)
        connection._writer = counted._writer  # type: ignore[assignment]


async def test_a_channel_left_and_entered_again_before_the_loop_turns_stays_subscribed(
        redis_url: str) -> None:
    """A waiter entering a channel whose last waiter just left (its UNSUBSCRIBE not written
    yet) is subscribed once the deferred write has run, and hears its notification."""
    async with _on_redis(redis_url) as (storage, client):
        channel = storage._gate("again")
        async with storage.subscribe_gate("again"):
            pass
        async with storage.subscribe_gate("again") as subscription:
            await anyio.sleep(0)  # the deferred write's turn
            assert await client.pubsub_channels(channel) == [channel.encode()]
            await client.publish(channel, b"1")
            with anyio.fail_after(10):
                while not await subscription.wait(1.0):
                    await client.publish(channel, b"1")


async def test_a_channel_left_stays_left_across_a_reconnect(redis_url: str) -> None:
    """A waiter leaving its channel writes UNSUBSCRIBE straight on the subscriber connection
    (no reply awaited): the server drops the channel, and redis-py's own record of it goes with
    the confirmation, so a reconnect re-subscribes only the channels still waited on."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    client = redis.asyncio.Redis.from_url(redis_url)
    pattern = f"{storage._keys.ns}:gate:*"
    kept = storage._gate("kept")
    try:
        async with configured(storage):
            async with storage.subscribe_gate("left"):
                pass
            async with storage.subscribe_gate("kept") as subscription:
                # confirming `kept` read the reply to the UNSUBSCRIBE of `left` before it
                assert await client.pubsub_channels(pattern) == [kept.encode()]
                mux = (await storage._redis.get()).mux
                assert mux is not None
                assert set(mux._pubsub.channels) == {kept.encode()}
                connection = mux._pubsub.connection
                assert connection is not None
                await connection.disconnect()  # the next read reconnects and re-subscribes
                await client.publish(kept, b"1")
                with anyio.fail_after(10):
                    while not await subscription.wait(1.0):  # (a publish before the
                        await client.publish(kept, b"1")  # re-subscription is not heard)
                assert await client.pubsub_channels(pattern) == [kept.encode()]
    finally:
        await client.aclose()
