"""The sweeper and corrupt records: a run it cannot decode is marked failed with the reason,
once, and the sweep goes on."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest
import redis.asyncio as aioredis

import reactorflow as rf
from reactorflow import config, records
from reactorflow.storage.redis.keys import RedisKeys
from tests.helpers import redis_namespace, unfired, unique

VANDAL = "vandal"
GARBAGE = b"\xc1 not msgpack"  # 0xc1 is never valid MessagePack
WRONG_SHAPE = msgspec.msgpack.encode({"status": 5, "updated_at": "yesterday"})


def _hanging_flow(entered: anyio.Event, log: list[str]) -> rf.Reactor:
    flow = rf.Reactor(unique("corrupt"))

    @flow.step
    async def first() -> int:
        log.append("first")
        return 1

    @first.undo
    async def undo_first(result: int) -> None:
        log.append("undo first")

    @flow.step
    async def hangs(first: int) -> int:
        log.append("hangs")
        if not entered.is_set():
            entered.set()
            await anyio.sleep_forever()
        return 2

    return flow


async def _stalled_run(storage: rf.Storage, flow: rf.Reactor, entered: anyio.Event) -> str:
    """A `running` run whose execution died: its lock is gone and nothing executes it."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        await entered.wait()
        (live,) = [live for live in await storage.scan_status(["running"], limit=100)
                   if live.reactor == flow.name]
        owner = await storage.lock_owner(live.run_id)
        assert owner is not None
        while await storage.release_lock(live.run_id, owner) > 0:
            pass
        tg.cancel_scope.cancel()  # the execution's "aborted" save is refused (fencing)
    head = await storage.load_head(live.run_id)
    assert head is not None and head.status == "running"
    assert await storage.lock_owner(live.run_id) is None
    return live.run_id


async def _vandalise_state(storage: rf.Storage, run_id: str, status: str, state: bytes) -> None:
    assert await storage.acquire_lock(run_id, VANDAL, 5.0)
    await storage.save_state(run_id, VANDAL, status=status, previous_status=status, state=state)
    assert await storage.release_lock(run_id, VANDAL) == 0


def _stall(seconds: float = 0.1) -> None:
    rf.configure(stall_timeout=seconds)


def _untouched(report: rf.SweepReport, run_id: str) -> bool:
    return run_id not in (report.recovered + report.expired + report.failed + report.skipped
                          + report.enqueued)


async def _failed_state(storage: rf.Storage, run_id: str) -> records.RunState:
    head = await storage.load_head(run_id)
    assert head is not None
    assert head.status == "failed"
    state = records.decode_state(head.state)
    assert state.status == "failed" and state.error is not None
    assert await storage.lock_owner(run_id) is None  # released after marking it
    return state


@pytest.mark.parametrize(("garbage", "detail"), [(GARBAGE, "malformed"),
                                                 (WRONG_SHAPE, "Expected `str`, got `int`")])
async def test_stalled_run_with_corrupt_state_is_marked_failed_once(
        storage: rf.Storage, garbage: bytes, detail: str) -> None:
    entered, log = anyio.Event(), []
    flow = _hanging_flow(entered, log)
    run_id = await _stalled_run(storage, flow, entered)
    await _vandalise_state(storage, run_id, "running", garbage)
    _stall()
    await anyio.sleep(0.15)

    report = await rf.sweep_once()
    assert report.failed == [run_id]
    assert report.recovered == report.expired == []
    assert log == ["first", "hangs"]  # nothing ran again, no rollback (none is possible)

    state = await _failed_state(storage, run_id)
    assert state.error is not None and state.error.type == "CorruptRecord"
    assert run_id in state.error.message and detail in state.error.message
    run = await flow.get(run_id)  # readable again: the state was rewritten
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "CorruptRecord"
    assert "run.failed" in [e.kind for e in run.history]

    await anyio.sleep(0.15)
    again = await rf.sweep_once()
    assert _untouched(again, run_id)
    assert (await flow.get(run_id)).history == run.history  # not written again


async def test_stalled_run_with_a_corrupt_step_record_is_marked_failed(
        storage: rf.Storage) -> None:
    entered, log = anyio.Event(), []
    flow = _hanging_flow(entered, log)
    run_id = await _stalled_run(storage, flow, entered)
    assert await storage.acquire_lock(run_id, VANDAL, 5.0)
    await storage.save_step(run_id, VANDAL, "first", GARBAGE)
    await storage.release_lock(run_id, VANDAL)
    _stall()
    await anyio.sleep(0.15)

    report = await rf.sweep_once()
    assert report.failed == [run_id]
    state = await _failed_state(storage, run_id)
    assert state.error is not None and state.error.type == "CorruptRecord"
    assert "malformed" in state.error.message
    assert log == ["first", "hangs"]
    await anyio.sleep(0.15)
    assert _untouched(await rf.sweep_once(), run_id)


async def test_one_corrupt_run_does_not_stop_the_recovery_of_others(
        storage: rf.Storage) -> None:
    bad_entered, bad_log = anyio.Event(), []
    bad_flow = _hanging_flow(bad_entered, bad_log)
    bad = await _stalled_run(storage, bad_flow, bad_entered)
    await _vandalise_state(storage, bad, "running", GARBAGE)
    good_entered, good_log = anyio.Event(), []
    good_flow = _hanging_flow(good_entered, good_log)
    async with anyio.create_task_group() as tg:
        tg.start_soon(good_flow.run)
        await good_entered.wait()
        live = [x for x in await storage.scan_status(["running"], 10) if x.run_id != bad]
        (good_live,) = live
        owner = await storage.lock_owner(good_live.run_id)
        assert owner is not None
        await storage.release_lock(good_live.run_id, owner)
        tg.cancel_scope.cancel()
    good = good_live.run_id
    _stall()
    await anyio.sleep(0.15)

    report = await rf.sweep_once()
    assert report.failed == [bad]
    assert report.recovered == [good]
    recovered = await good_flow.get(good)
    assert recovered.status is rf.Status.COMPLETED and recovered.value == 2
    assert good_log == ["first", "hangs", "hangs"]


async def test_paused_run_with_corrupt_state_does_not_crash_the_sweep(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("corrupt-paused"))

    @flow.step
    async def first() -> int:
        return 1

    @flow.interrupt(timeout=0.5)  # time enough to void its timer first, under load too
    async def gate(payload: str, first: int) -> str:
        return payload

    paused = await flow.run()
    await unfired(paused)
    assert paused.status is rf.Status.PAUSED
    await _vandalise_state(storage, paused.id, "paused", GARBAGE)
    await anyio.sleep(0.6)

    report = await rf.sweep_once()  # must not raise
    assert paused.id in report.failed
    state = await _failed_state(storage, paused.id)
    assert state.error is not None and state.error.type == "CorruptRecord"
    assert _untouched(await rf.sweep_once(), paused.id)


# -- Redis: records written by something else into the run hash ----------------------------------


@pytest.fixture
async def redis_storage(redis_url: str) -> AsyncIterator[tuple[rf.RedisStorage, RedisKeys,
                                                               aioredis.Redis]]:
    namespace = redis_namespace("corrupt")
    storage = rf.RedisStorage.from_url(redis_url, namespace=namespace)
    rf.configure(storage=storage)
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield storage, RedisKeys(namespace), client
    finally:
        config.reset()
        await client.aclose()
        await storage.aclose()


async def _stalled_redis_run(storage: rf.RedisStorage) -> tuple[rf.Reactor, str, list[str]]:
    entered, log = anyio.Event(), []
    flow = _hanging_flow(entered, log)
    return flow, await _stalled_run(storage, flow, entered), log


async def test_redis_run_hash_with_garbage_meta_is_marked_failed(
        redis_storage: tuple[rf.RedisStorage, RedisKeys, aioredis.Redis]) -> None:
    storage, keys, client = redis_storage
    flow, run_id, log = await _stalled_redis_run(storage)
    key = keys.run(run_id)
    assert await client.hset(key, "meta", GARBAGE) == 0  # an existing field, overwritten
    _stall()
    await anyio.sleep(0.15)

    report = await rf.sweep_once()
    assert report.failed == [run_id]
    state = await _failed_state(storage, run_id)
    assert state.error is not None and state.error.type == "CorruptRecord"
    assert "malformed" in state.error.message
    assert log == ["first", "hangs"]
    failed = await flow.get(run_id)  # readable again: failed, with the reason (no inputs)
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.type == "CorruptRecord"
    assert failed.inputs is None
    summaries = (await flow.list_runs(status="running")).runs
    assert run_id not in [s.id for s in summaries]
    await anyio.sleep(0.15)
    assert _untouched(await rf.sweep_once(), run_id)


async def test_redis_run_of_an_unknown_schema_version_is_marked_failed(
        redis_storage: tuple[rf.RedisStorage, RedisKeys, aioredis.Redis]) -> None:
    storage, keys, client = redis_storage
    flow, run_id, log = await _stalled_redis_run(storage)
    key = keys.run(run_id)
    meta = records.decode_meta(await client.hget(key, "meta"))
    future = msgspec.structs.replace(meta, v=records.SCHEMA_VERSION + 98)
    await client.hset(key, "meta", records.encode(future))
    _stall()
    await anyio.sleep(0.15)

    report = await rf.sweep_once()
    assert report.failed == [run_id]
    state = await _failed_state(storage, run_id)
    assert state.error is not None and state.error.type == "CorruptRecord"
    assert f"schema version {records.SCHEMA_VERSION + 98}" in state.error.message
    assert log == ["first", "hangs"]
    run = await flow.get(run_id)
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.type == "CorruptRecord"
    await anyio.sleep(0.15)
    assert _untouched(await rf.sweep_once(), run_id)
    head = await storage.load_head(run_id)
    assert head is not None and time.time() - head.touched_at >= 0.15  # not written again
