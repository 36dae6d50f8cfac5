"""Storage contract of map element slots beyond `test_contract.py`, on every backend: taking an
element's lock and reading its slots in one call; element writes fenced on the run's lock."""

from __future__ import annotations

import pytest

import reactorflow as rf
from reactorflow.storage.base import Storage
from tests.helpers import until_lock_lapses
from tests.storage.test_contract import new_run

BACKENDS = pytest.mark.parametrize("storage", ["memory", "redis", "cluster"], indirect=True)


@BACKENDS
async def test_lock_and_load_takes_the_lock_then_reads(storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "m", {0: b"e0", 2: b"e2"})
    lock = f"{run_id}:m:2"
    found = await storage.lock_and_load_elements(lock, "me", 10.0, run_id,
                                                 [("m", 2, 1), ("m", 0, 3), ("n", 0, 0)])
    assert found == [[b"e2"], [b"e0", None, b"e2"], []]
    assert await storage.lock_owner(lock) == "me"


@BACKENDS
async def test_lock_and_load_reads_nothing_when_another_owner_holds_the_lock(
        storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "m", {1: b"e1"})
    lock = f"{run_id}:m:1"
    assert await storage.acquire_lock(lock, "other", 10.0)
    assert await storage.lock_and_load_elements(lock, "me", 10.0, run_id, [("m", 1, 1)]) is None
    assert await storage.lock_owner(lock) == "other"


@BACKENDS
async def test_settle_element_stores_first_wins_marks_and_claims_in_one_call(
        storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "m#job", {3: b"2"})  # the counter starts at 2
    first = await storage.settle_element(run_id, "m", 0, b"e0", control="m#job", stop=1,
                                         advance=3)
    assert first is not None and (first.written, first.stored, first.following) == (1, 1, 2)
    again = await storage.settle_element(run_id, "m", 0, b"other", control="m#job", stop=1,
                                         advance=3)
    assert again is not None and (again.written, again.stored, again.following) == (0, 1, None)
    second = await storage.settle_element(run_id, "m", 1, b"e1", control="m#job", stop=1,
                                          advance=3)
    assert second is not None and second.following == 3  # consecutive claims
    plain = await storage.settle_element(run_id, "m", 2, b"e2", control="m#job")
    assert plain is not None and (plain.written, plain.following) == (1, None)
    assert await storage.load_elements(run_id, "m", 0, 3) == [b"e0", b"e1", b"e2"]
    assert await storage.load_elements(run_id, "m#job", 1, 3) == [b"0", None, b"4"]
    assert await storage.settle_element("no-such-run", "m", 0, b"x", control="m#job") is None


@BACKENDS
async def test_concurrent_settles_claim_each_counter_value_once(storage: Storage) -> None:
    import asyncio

    run_id = await new_run(storage)
    writes = await asyncio.gather(*(storage.settle_element(run_id, "m", i % 20, b"x",
                                                           control="m#job", advance=3)
                                    for i in range(40)))
    claimed = sorted(w.following for w in writes if w is not None and w.following is not None)
    assert claimed == list(range(20))  # one claim per stored outcome, none twice


@BACKENDS
async def test_save_elements_by_an_owner_is_fenced_on_the_runs_lock(storage: Storage) -> None:
    """A write that names the run's lock owner lands only while that owner holds the lock: an
    owner whose lock expired, or was taken over, writes no element (nothing at all)."""
    run_id = await new_run(storage, owner="owner-a", lock_ttl=0.5)
    written = await storage.save_elements(run_id, "m", {0: b"a0"}, owner="owner-a")
    assert written is not None and (written.written, written.stored) == (1, 1)

    await until_lock_lapses(storage, run_id)  # expired, not yet taken: refused
    with pytest.raises(rf.LockLost) as lost:
        await storage.save_elements(run_id, "m", {1: b"a1-late"}, owner="owner-a")
    assert lost.value.run_id == run_id and lost.value.owner == "owner-a"

    assert await storage.acquire_lock(run_id, "owner-b", 10.0)  # taken over
    for replace in (False, True):
        with pytest.raises(rf.LockLost):
            await storage.save_elements(run_id, "m", {0: b"a0-again", 2: b"a2"},
                                        replace=replace, owner="owner-a")
    with pytest.raises(rf.LockLost):
        await storage.save_elements(run_id, "m#job", {0: b"args", 3: b"1"}, owner="owner-a")
    by_b = await storage.save_elements(run_id, "m", {1: b"b1"}, owner="owner-b")
    assert by_b is not None and (by_b.written, by_b.stored) == (1, 2)
    job = await storage.save_elements(run_id, "m", {3: b"job3"})  # an element job: unfenced
    assert job is not None and job.written == 1

    assert await storage.load_elements(run_id, "m", 0, 4) == [b"a0", b"b1", None, b"job3"]
    assert await storage.load_elements(run_id, "m#job", 0, 4) == [None] * 4
    assert await storage.count_elements(run_id, "m") == 3
    assert await storage.save_elements("no-such-run", "m", {0: b"x"}, owner="owner-a") is None
