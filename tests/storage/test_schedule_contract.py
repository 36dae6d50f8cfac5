"""The schedule primitives of the storage contract, on every backend (memory, Redis, and the
Redis Cluster of the cluster lane)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import anyio
import pytest

from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ScheduleState
from tests.conftest import ALL_BACKENDS, on_every


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    """The storage on each backend in turn, the Redis Cluster included (the cluster lane)."""
    async for backend in on_every(request):
        yield backend


def key() -> str:
    return f"nightly-{uuid.uuid4().hex[:8]}:0"


async def test_the_first_load_creates_the_cursor_and_later_loads_keep_it(
        storage: Storage) -> None:
    k = key()
    assert await storage.schedule_load(k, None) is None  # only reads
    assert await storage.schedule_load(k, 1000) == ScheduleState(cursor=1000)
    assert await storage.schedule_load(k, 5000) == ScheduleState(cursor=1000)


async def test_of_concurrent_advances_of_one_tick_exactly_one_wins(storage: Storage) -> None:
    k = key()
    await storage.schedule_load(k, 1000)
    won: list[bool] = []

    async def claim() -> None:
        won.append(await storage.schedule_advance(k, 1000, 2000))

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(claim)
    assert won.count(True) == 1
    state = await storage.schedule_load(k, None)
    assert state is not None and state.cursor == 2000
    assert await storage.schedule_advance(k, 1000, 3000) is False  # stale expectation


async def test_a_paused_schedule_is_not_advanced_and_resuming_skips_the_paused_time(
        storage: Storage) -> None:
    k = key()
    await storage.schedule_load(k, 1000)
    assert await storage.schedule_pause(k, True, 1500) is True
    assert await storage.schedule_pause(k, True, 1600) is False  # already paused
    assert await storage.schedule_advance(k, 1000, 2000) is False
    assert await storage.schedule_pause(k, False, 9000) is True
    assert await storage.schedule_load(k, None) == ScheduleState(cursor=9000)
    assert await storage.schedule_pause(key(), True, 7) is True  # a missing one is created


async def test_record_keeps_the_last_run_and_the_last_error(storage: Storage) -> None:
    k = key()
    await storage.schedule_record(k, last_run="r0")  # missing: left missing
    assert await storage.schedule_load(k, None) is None
    await storage.schedule_load(k, 1)
    await storage.schedule_record(k, last_run="r1")
    await storage.schedule_record(k, error="inputs refused")
    assert await storage.schedule_load(k, None) == ScheduleState(
        cursor=1, last_run="r1", error="inputs refused")
    await storage.schedule_record(k, last_run="r2")
    assert await storage.schedule_load(k, None) == ScheduleState(cursor=1, last_run="r2")


async def test_a_claim_with_a_lease_records_the_tick_pending_until_its_record(
        storage: Storage) -> None:
    k = key()
    await storage.schedule_load(k, 1000)
    assert await storage.schedule_advance(k, 1000, 2000, lease=5000)
    assert await storage.schedule_advance(k, 2000, 3000, lease=6000)
    assert await storage.schedule_advance(k, 3000, 4000)  # no lease: a skipped tick
    state = await storage.schedule_load(k, None)
    assert state is not None and state.pending == ((2000, 5000), (3000, 6000))
    await storage.schedule_record(k, last_run="r1", tick=2000)
    await storage.schedule_record(k, error="refused", tick=3000)
    assert await storage.schedule_load(k, None) == ScheduleState(
        cursor=4000, last_run="r1", error="refused")
    assert await storage.schedule_advance(k, 1000, 9000, lease=9999) is False  # lost: nothing
    state = await storage.schedule_load(k, None)
    assert state is not None and state.pending == () and state.cursor == 4000


async def test_of_concurrent_takeovers_of_a_lapsed_tick_exactly_one_wins(
        storage: Storage) -> None:
    k = key()
    await storage.schedule_load(k, 1000)
    await storage.schedule_advance(k, 1000, 2000, lease=5000)
    won: list[bool] = []

    async def take_over(lease: int) -> None:
        won.append(await storage.schedule_relet(k, 2000, 5000, lease))

    async with anyio.create_task_group() as tg:
        for index in range(20):
            tg.start_soon(take_over, 8000 + index)
    assert won.count(True) == 1
    state = await storage.schedule_load(k, None)
    assert state is not None and len(state.pending) == 1 and state.pending[0][1] >= 8000
    assert await storage.schedule_relet(k, 2000, 5000, 9000) is False  # stale lease
    await storage.schedule_record(k, last_run="r", tick=2000)
    assert await storage.schedule_relet(k, 2000, state.pending[0][1], 9000) is False  # done
    assert await storage.schedule_relet(key(), 2000, 5000, 9000) is False  # no such schedule
