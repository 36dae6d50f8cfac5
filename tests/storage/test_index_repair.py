"""Findable runs (storage/contract/storage.py): after `create_run` or a status write returns or
raises, the run is findable by the sweeper, through its index entries or through the record pass
(`scan_records`), which writes lost entries again; `repair_index` does it for one run.

The cut between a run's script and its index writes is real (tests/cutoff.py: the server
refuses the index writes, after the script stored the run). On one Redis node a creation
writes its index entries in its own script, so it cannot be cut that way: there the lost write
is modelled by deleting the entries.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest

from reactorflow.errors import LockLost, StorageError
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import Liveness
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.cutoff import index_cut

OWNER = "owner-1"
WALK_CALLS = 500
"""Calls of the record pass that go round the whole test keyspace at least once."""


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


def _url(request: pytest.FixtureRequest) -> str:
    lane = request.node.callspec.params["storage"]
    return str(request.getfixturevalue("redis_cluster_url" if lane == "cluster"
                                       else "redis_url"))


async def _create(storage: Storage, run_id: str | None = None, *,
                  status: str = "running") -> str:
    run_id = run_id or f"run-{uuid.uuid4().hex[:12]}"
    assert await storage.create_run(run_id, reactor="flow", status=status, meta=b"m",
                                    state=b"s", created_at=time.time(), owner=OWNER,
                                    lock_ttl=10.0)
    return run_id


async def _indexed(storage: Storage, run_id: str, status: str) -> bool:
    return any(live.run_id == run_id for live in await storage.scan_status([status], 1000))


async def _walk_until(storage: Storage, run_id: str) -> Liveness:
    """The record pass, called until it returns `run_id` (it goes round within WALK_CALLS)."""
    for _ in range(WALK_CALLS):
        for live in await storage.scan_records(200):
            if live.run_id == run_id:
                return live
    raise AssertionError(f"the record pass never found {run_id}")


async def _cut_creation(storage: Storage, request: pytest.FixtureRequest) -> str:
    """A run stored `running` whose index entries were lost."""
    assert isinstance(storage, RedisStorage)
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    if request.node.callspec.params["storage"] == "cluster":
        async with index_cut(_url(request), storage._keys.ns) as cut:
            with pytest.raises(StorageError):  # the run is stored, its index writes refused
                await _create(cut, run_id)
    else:  # one node: the script writes them; the lost write modelled
        await _create(storage, run_id)
        conn = await storage._redis.get()
        await conn.client.zrem(storage._keys.by_status("flow", "running"), run_id)
        await conn.client.zrem(storage._keys.by_reactor("flow"), run_id)
    assert (await storage.load_head(run_id)) is not None
    assert not await _indexed(storage, run_id, "running")
    return run_id


async def test_the_record_pass_finds_nothing_when_every_run_is_indexed(
        storage: Storage) -> None:
    running = await _create(storage)
    paused = await _create(storage)
    await storage.save_state(paused, OWNER, status="paused", previous_status="running",
                             state=b"p")
    ended = await _create(storage)
    await storage.save_state(ended, OWNER, status="completed", previous_status="running",
                             state=b"c", release=True)
    for _ in range(WALK_CALLS // 10):
        assert [live for live in await storage.scan_records(1000)
                if live.run_id in (running, paused, ended)] == []
    for run_id in (running, paused, ended, "no-such-run"):
        assert await storage.repair_index(run_id) is False
    assert await _indexed(storage, running, "running")
    assert await _indexed(storage, paused, "paused")


@pytest.mark.parametrize("storage", ["redis", "cluster"], indirect=True)
async def test_a_creation_cut_off_before_its_index_writes_is_found_by_the_record_pass(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    run_id = await _cut_creation(storage, request)

    live = await _walk_until(storage, run_id)

    assert (live.reactor, live.status, live.lock_owner, live.problem) == (
        "flow", "running", OWNER, None)
    assert await _indexed(storage, run_id, "running")  # written again
    page = await storage.list_runs("flow", None, 100, None)
    assert run_id in [head.run_id for head in page.heads]
    assert await storage.repair_index(run_id) is False  # nothing left to repair


@pytest.mark.parametrize("storage", ["redis", "cluster"], indirect=True)
async def test_repair_index_writes_the_entries_of_a_cut_off_creation_again(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    run_id = await _cut_creation(storage, request)

    assert await storage.repair_index(run_id) is True

    assert await _indexed(storage, run_id, "running")
    assert await storage.repair_index(run_id) is False


@pytest.mark.parametrize("storage", ["redis", "cluster"], indirect=True)
async def test_a_status_change_cut_off_before_its_index_moves_is_found_by_the_record_pass(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    # a storage object that never saw the run (a worker, a sweeper) sends its index moves
    # apart from its script, on one node too
    assert isinstance(storage, RedisStorage)
    run_id = await _create(storage)
    async with index_cut(_url(request), storage._keys.ns) as cut:
        with pytest.raises(StorageError):
            await cut.save_state(run_id, OWNER, status="paused", previous_status="running",
                                 state=b"p")
    head = await storage.load_head(run_id)
    assert head is not None and head.status == "paused"  # written; its index moves refused
    assert not await _indexed(storage, run_id, "running")  # (a stale hint: dropped)
    assert not await _indexed(storage, run_id, "paused")

    live = await _walk_until(storage, run_id)

    assert (live.status, live.lock_owner) == ("paused", OWNER)
    assert await _indexed(storage, run_id, "paused")


@pytest.mark.parametrize("storage", ["redis", "cluster"], indirect=True)
async def test_the_pending_index_record_lives_until_the_index_writes_landed(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    assert isinstance(storage, RedisStorage)
    conn = await storage._redis.get()

    async def record(run_id: str) -> bytes | None:
        value = await conn.client.hget(storage._keys.run(run_id), "ix")
        return value if value is None else bytes(value)

    whole = await _create(storage)
    assert await record(whole) is None  # written with the run, or cleared once they landed
    async with index_cut(_url(request), storage._keys.ns) as cut:
        with pytest.raises(StorageError):
            await cut.save_state(whole, OWNER, status="paused", previous_status="running",
                                 state=b"p")
    assert await record(whole) is not None  # the write's repair record, in the run's slot

    await _walk_until(storage, whole)

    assert await record(whole) is None


@pytest.mark.parametrize("storage", ["redis", "cluster"], indirect=True)
async def test_an_ending_cut_off_before_its_index_moves_is_listed_again_after_the_record_pass(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    # an ended run is nothing the sweeper recovers, but its repair record tells the record
    # pass to write its entries again: listing by status finds it
    assert isinstance(storage, RedisStorage)
    conn = await storage._redis.get()
    run_id = await _create(storage)
    async with index_cut(_url(request), storage._keys.ns) as cut:
        with pytest.raises(StorageError):
            await cut.save_state(run_id, OWNER, status="completed",
                                 previous_status="running", state=b"c", release=True)
    assert (await storage.list_runs("flow", "completed", 10, None)).heads == []

    for _ in range(WALK_CALLS):
        assert await storage.scan_records(200) == []  # (not live: nothing to sweep)
        if await conn.client.hget(storage._keys.run(run_id), "ix") is None:
            break

    assert [h.run_id for h in (await storage.list_runs("flow", "completed", 10, None)).heads
            ] == [run_id]


@pytest.mark.parametrize("storage", ["redis", "cluster"], indirect=True)
async def test_a_unit_dispatch_cut_off_before_its_unit_index_entry_is_found_after_the_record_pass(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    # save_step(unit=True): the unit index lives in another slot than the run (a cluster): a
    # dispatch cut off after its script leaves a pending unit record the record pass finds
    assert isinstance(storage, RedisStorage)
    conn = await storage._redis.get()
    run_id = await _create(storage)

    async def indexed() -> bool:
        return any((u.run_id, u.key) == (run_id, "u") for u in await storage.scan_units(1000))

    async with index_cut(_url(request), storage._keys.ns) as cut:
        with pytest.raises(StorageError):
            await cut.save_step(run_id, OWNER, "u", b"dispatched", unit=True)
    stored = await storage.load_step(run_id, "u") is not None
    if request.node.callspec.params["storage"] == "redis":
        assert not stored  # one node: the script writes the entry itself, refused whole
        return
    assert stored and not await indexed()  # the record stored, its index entry refused

    for _ in range(WALK_CALLS):
        await storage.scan_records(200)
        if await indexed():
            break

    assert await indexed()
    assert await conn.client.hget(storage._keys.run(run_id), "ux") is None  # cleared


@pytest.mark.parametrize("storage", ["redis", "cluster"], indirect=True)
async def test_a_unit_dispatch_leaves_no_pending_record_and_its_report_clears_the_entry(
        storage: Storage) -> None:
    assert isinstance(storage, RedisStorage)
    conn = await storage._redis.get()
    run_id = await _create(storage)

    await storage.save_step(run_id, OWNER, "u", b"dispatched", unit=True)

    assert await conn.client.hget(storage._keys.run(run_id), "ux") is None
    assert [(u.run_id, u.key) for u in await storage.scan_units(1000)
            if u.run_id == run_id] == [(run_id, "u")]
    assert await storage.save_unit(run_id, "u", b"done")
    assert [u for u in await storage.scan_units(1000) if u.run_id == run_id] == []


@pytest.mark.parametrize("storage", ["redis", "cluster"], indirect=True)
async def test_a_refused_status_write_touches_no_index_entry(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    # a storage that knows the run (its facts) sent a cluster's index moves after the script
    # even when the script refused the write: the ZREM of the run's own status entry landed,
    # and a cut before its re-adding left a running run out of every status index
    assert isinstance(storage, RedisStorage)
    run_id = await _create(storage)
    async with index_cut(_url(request), storage._keys.ns, removals=True) as cut:
        assert await cut.load_head(run_id) is not None  # (it learns the run's facts)
        with pytest.raises(LockLost):
            await cut.save_state(run_id, "not-the-owner", status="paused",
                                 previous_status="running", state=b"p")

    assert await _indexed(storage, run_id, "running")
