"""Data subjects in the storage contract, on every backend (memory, Redis, and the Redis Cluster
of the cluster lane): a subject's wrapped data key is created first-wins (two concurrent first
runs agree on one), replaced only by compare-and-set, destroyed with its run index in one step;
the run index drops runs that are gone; erasures are an audit list, newest first."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import anyio
import pytest

from reactorflow import clock
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.testing import FakeClock
from tests.conftest import ALL_BACKENDS, on_every
from tests.storage.test_contract import OWNER, new_run


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


def digest() -> str:
    return uuid.uuid4().hex * 2  # the shape of a subject digest (64 hex digits)


async def test_the_first_run_entered_creates_the_key_and_later_runs_get_it(
        storage: Storage) -> None:
    s = digest()
    first, second = await new_run(storage), await new_run(storage)
    assert await storage.subject_key(s) is None
    assert await storage.enter_subject_run(s, first, b"first") == b"first"
    assert await storage.enter_subject_run(s, second, b"second") == b"first"
    assert await storage.enter_subject_run(s, second, b"third") == b"first"  # idempotent
    assert await storage.subject_key(s) == b"first"
    assert sorted(await storage.subject_runs(s)) == sorted([first, second])


async def test_concurrent_first_runs_agree_on_one_key(storage: Storage) -> None:
    s = digest()
    runs = [await new_run(storage) for _ in range(20)]
    got: list[bytes] = []

    async def enter(n: int) -> None:
        got.append(await storage.enter_subject_run(s, runs[n], b"key-%d" % n))

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(enter, n)
    assert len(got) == 20 and len(set(got)) == 1, got
    assert await storage.subject_key(s) == got[0]
    assert sorted(await storage.subject_runs(s)) == sorted(runs)


async def test_a_run_gets_the_key_only_while_it_is_indexed_under_it(storage: Storage) -> None:
    s = digest()
    old, stranger = await new_run(storage), await new_run(storage)
    await storage.enter_subject_run(s, old, b"k1")
    assert await storage.run_subject_key(s, old) == b"k1"
    assert await storage.run_subject_key(s, stranger) is None  # never entered
    await storage.destroy_subject(s)
    assert await storage.run_subject_key(s, old) is None
    fresh = await new_run(storage)
    assert await storage.enter_subject_run(s, fresh, b"k2") == b"k2"  # a fresh key
    assert await storage.run_subject_key(s, fresh) == b"k2"
    assert await storage.run_subject_key(s, old) is None  # erased stays erased


async def test_a_key_is_replaced_only_while_it_is_the_one_read(storage: Storage) -> None:
    s = digest()
    await storage.enter_subject_run(s, "r", b"old")
    assert await storage.replace_subject_key(s, b"stale", b"new") is False
    assert await storage.subject_key(s) == b"old"
    assert await storage.replace_subject_key(s, b"old", b"new") is True
    assert await storage.replace_subject_key(s, b"old", b"newer") is False  # not twice
    assert await storage.subject_key(s) == b"new"
    assert await storage.replace_subject_key(digest(), b"old", b"new") is False  # none at all


async def test_destroy_removes_the_key_and_the_index_and_returns_the_runs(
        storage: Storage) -> None:
    s, other = digest(), digest()
    runs = sorted([await new_run(storage), await new_run(storage)])
    for run_id in runs:
        await storage.enter_subject_run(s, run_id, b"k")
    kept = await new_run(storage)
    await storage.enter_subject_run(other, kept, b"o")

    assert await storage.destroy_subject(s) == runs
    assert await storage.subject_key(s) is None
    assert await storage.subject_runs(s) == []
    assert await storage.destroy_subject(s) is None  # a second erasure finds nothing
    assert await storage.subject_key(other) == b"o"  # nothing else changes
    assert await storage.subject_runs(other) == [kept]
    # a new run of the forgotten subject starts afresh
    assert await storage.enter_subject_run(s, await new_run(storage), b"fresh") == b"fresh"


async def test_an_unknown_subject_destroys_nothing(storage: Storage) -> None:
    s = digest()
    assert await storage.destroy_subject(s) is None
    assert await storage.subject_key(s) is None


async def test_the_index_lists_stored_runs_once_and_drops_those_that_are_gone(
        storage: Storage) -> None:
    s = digest()
    stored = await new_run(storage)
    await storage.enter_subject_run(s, stored, b"k")
    await storage.enter_subject_run(s, stored, b"k")  # idempotent
    await storage.enter_subject_run(s, "never-created", b"k")  # a start that failed
    assert await storage.subject_runs(s) == [stored]


async def test_the_digests_of_subjects_with_a_key_are_listed_in_pages(storage: Storage) -> None:
    made = {digest() for _ in range(25)}
    for s in made:
        await storage.enter_subject_run(s, "r", b"k")
    gone = sorted(made)[0]
    await storage.destroy_subject(gone)
    seen: list[str] = []
    cursor = ""
    for _ in range(1000):
        page, cursor = await storage.subject_digests(cursor, 7)
        seen += page
        if not cursor:
            break
    assert made - {gone} <= set(seen)
    assert gone not in seen


async def test_erasures_are_listed_newest_first(storage: Storage) -> None:
    before = await storage.erasures(1000)
    for n in range(3):
        await storage.record_erasure(b"erasure-%d" % n)
    assert (await storage.erasures(2)) == [b"erasure-2", b"erasure-1"]
    assert (await storage.erasures(1000))[:3] == [b"erasure-2", b"erasure-1", b"erasure-0"]
    assert len(await storage.erasures(1000)) == len(before) + 3


async def test_retention_drops_an_ended_runs_index_entry_with_the_run_memory() -> None:
    fake = FakeClock()
    previous = clock.use(fake)
    try:
        storage = MemoryStorage(retention=60)
        s = digest()
        run_id = await new_run(storage)
        await storage.enter_subject_run(s, run_id, b"k")
        await storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                                 state=b"s", release=True)
        assert await storage.subject_runs(s) == [run_id]
        await fake.advance(61)
        assert await storage.load_run(run_id) is None
        assert await storage.subject_runs(s) == []
        assert storage._subject_runs.get(s) == set()  # removed, not only hidden
    finally:
        clock.use(previous)


async def test_retention_drops_an_ended_runs_index_entry_with_the_run_redis(
        redis_url: str) -> None:
    from tests.helpers import redis_namespace

    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace("subj"), retention=60)
    try:
        s = digest()
        run_id = await new_run(storage)
        await storage.enter_subject_run(s, run_id, b"k")
        conn = await storage._redis.get()
        await conn.client.delete(*storage._keys.run_keys(run_id))  # what its expiry does
        assert await storage.subject_runs(s) == []
        index = storage._subject_keys(s)[1]
        assert await conn.client.smembers(index) == set()  # removed, not only hidden
    finally:
        await storage.aclose()


async def test_a_large_index_is_pruned_of_gone_runs_as_runs_enter_redis(redis_url: str) -> None:
    """Redis keeps the index in another slot than the runs: past `PRUNE_AT` entries, each run
    that enters also checks a sample of the index and removes the entries of runs gone."""
    from reactorflow.storage.redis.subjects import PRUNE_AT, PRUNE_SAMPLE
    from tests.helpers import redis_namespace

    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace("subj"))
    try:
        s = digest()
        conn = await storage._redis.get()
        index = storage._subject_keys(s)[1]
        await conn.client.sadd(index, *[f"expired-{n}" for n in range(PRUNE_AT + 1)])
        live = await new_run(storage)
        await storage.enter_subject_run(s, live, b"k")
        left = await conn.client.scard(index)
        assert left <= PRUNE_AT + 2 - (PRUNE_SAMPLE - 1), left
        assert await conn.client.sismember(index, live)  # a stored run is never pruned
    finally:
        await storage.aclose()
