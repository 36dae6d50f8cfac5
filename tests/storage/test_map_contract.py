"""Storage contract of map element slots beyond `test_contract.py`, on every backend: taking an
element's lock and reading its slots in one call; element writes fenced on the run's lock."""

from __future__ import annotations

import pytest

import reactorflow as rf
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import Claim, ElementStart
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
async def test_a_window_claim_waits_until_a_chunk_fits(storage: Storage) -> None:
    """With a `Claim`, a settle claims a chunk only once `want` indexes fit the window (or
    nothing is out), then all the room there is, never past the map's end."""
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "m#job", {3: b"4"})  # elements 0-3 dispatched
    claim = Claim(want=3, window=4, total=9)

    async def settle(index: int) -> tuple[int | None, int]:
        written = await storage.settle_element(run_id, "m", index, b"x", control="m#job",
                                               advance=3, claim=claim)
        assert written is not None and written.written == 1
        return written.following, written.claimed

    assert await settle(0) == (None, 0)  # room 1 < 3: wait
    assert await settle(1) == (None, 0)  # room 2 < 3
    assert await settle(2) == (4, 3)  # room 3: elements 4-6
    assert await settle(3) == (None, 0)  # room 1 again (4-6 are out)
    assert await settle(4) == (7, 2)  # the map's last 2 fit: a shorter last chunk
    assert await storage.load_elements(run_id, "m#job", 3, 1) == [b"9"]
    for index in (5, 6, 7, 8):
        assert await settle(index) == (None, 0)  # nothing left to claim
    assert await storage.count_elements(run_id, "m") == 9


@BACKENDS
async def test_a_window_claim_takes_all_the_room_when_nothing_is_out(storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "m#job", {3: b"1"})  # element 0 dispatched
    written = await storage.settle_element(run_id, "m", 0, b"x", control="m#job", advance=3,
                                           claim=Claim(want=50, window=8, total=100))
    assert written is not None and (written.following, written.claimed) == (1, 8)


@BACKENDS
async def test_concurrent_window_claims_never_put_more_than_the_window_out(
        storage: Storage) -> None:
    """Settles racing each other each see the window as the others left it: the indexes
    claimed are disjoint and consecutive, and at no claim are more than `window` elements out
    (dispatched without an outcome)."""
    import asyncio

    run_id = await new_run(storage)
    window, total = 6, 60
    await storage.save_elements(run_id, "m#job", {3: str(window).encode()})
    claim = Claim(want=2, window=window, total=total)
    claimed: list[int] = []
    todo = list(range(window))

    async def settle(index: int) -> None:
        written = await storage.settle_element(run_id, "m", index, b"x", control="m#job",
                                               advance=3, claim=claim)
        assert written is not None
        if written.following is not None:
            taken = range(written.following, written.following + written.claimed)
            claimed.extend(taken)
            todo.extend(taken)
            assert taken.stop - written.stored <= window  # out, as the claim left it

    while todo:
        batch, todo[:] = list(todo), []
        await asyncio.gather(*(settle(index) for index in batch))
    assert sorted(claimed) == list(range(window, total))  # each index claimed once
    assert await storage.count_elements(run_id, "m") == total


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


async def _start(storage: Storage, run_id: str, index: int,
                 owner: str = "job") -> ElementStart | None:
    return await storage.start_element(f"{run_id}:m:{index}", owner, 10.0, run_id,
                                       [("m", index, 1), ("m#items", index, 2)],
                                       starts=("m#started", index), stop=("m#job", 1))


async def _set_status(storage: Storage, run_id: str, status: str, previous: str) -> None:
    await storage.save_state(run_id, "owner-1", status=status, previous_status=previous,
                             state=b"state-1")


@BACKENDS
async def test_start_element_takes_the_lock_marks_the_element_and_reads(
        storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "m#items", {0: b"i0", 1: b"i1"})
    found = await _start(storage, run_id, 0)
    assert found is not None and not found.refused
    assert found.reads == [[None], [b"i0", b"i1"]]
    assert await storage.lock_owner(f"{run_id}:m:0") == "job"
    assert await storage.load_elements(run_id, "m#started", 0, 2) == [b"1", None]
    assert await _start(storage, run_id, 0, owner="duplicate") is None  # its lock is held
    assert await storage.load_elements(run_id, "m#started", 0, 2) == [b"1", None]


@BACKENDS
async def test_start_element_refuses_an_element_not_started_once_the_map_is_closed(
        storage: Storage) -> None:
    """Closed: the run's status ended or rolling back (or an atomic map's stop marker set).
    An element marked before (cut off mid-body) is never refused: it runs again."""
    run_id = await new_run(storage)
    assert (await _start(storage, run_id, 0)) is not None  # marked while the run runs
    await _set_status(storage, run_id, "rolling_back", "running")
    late = await _start(storage, run_id, 1)
    assert late is not None and late.refused and late.reads == [[None], [None, None]]
    again = await _start(storage, run_id, 0)  # (the same owner: re-entrant)
    assert again is not None and not again.refused
    for status, previous in (("failed", "rolling_back"), ("cancelled", "failed")):
        await _set_status(storage, run_id, status, previous)
        refused = await _start(storage, run_id, 2 if status == "failed" else 3)
        assert refused is not None and refused.refused
    assert await storage.load_elements(run_id, "m#started", 0, 4) == [b"1", None, None, None]

    stopped = await new_run(storage)  # a running run whose atomic map stopped
    await storage.settle_element(stopped, "m", 5, b"failed", control="m#job", stop=1)
    skipped = await _start(storage, stopped, 6)
    assert skipped is not None and skipped.refused
    gone = await _start(storage, "no-such-run", 0)
    assert gone is not None and gone.refused


@BACKENDS
async def test_element_starts_racing_the_rollbacks_save_are_each_marked_or_refused(
        storage: Storage) -> None:
    """Starts concurrent with the save that begins the rollback: an element was started (and
    marked) exactly when it was not refused, so a rollback that reads the marks afterwards
    knows every element that may run."""
    import asyncio

    run_id = await new_run(storage)

    async def close() -> None:
        await asyncio.sleep(0)
        await _set_status(storage, run_id, "rolling_back", "running")

    *starts, _ = await asyncio.gather(*(_start(storage, run_id, i) for i in range(30)), close())
    marks = await storage.load_elements(run_id, "m#started", 0, 30)
    assert [s is not None and not s.refused for s in starts] == [m is not None for m in marks]
    after = await _start(storage, run_id, 30)
    assert after is not None and after.refused


@BACKENDS
async def test_a_settle_in_a_closed_map_stores_its_outcome_but_claims_no_successor(
        storage: Storage) -> None:
    run_id = await new_run(storage)
    open_ = await storage.settle_element(run_id, "m", 0, b"e0", control="m#job", advance=3)
    assert open_ is not None and open_.following == 0 and not open_.closed
    await _set_status(storage, run_id, "cancelled", "running")
    late = await storage.settle_element(run_id, "m", 1, b"e1", control="m#job", advance=3)
    assert late is not None and (late.written, late.stored, late.following) == (1, 2, None)
    assert late.closed
    assert await storage.load_elements(run_id, "m#job", 3, 1) == [b"1"]
