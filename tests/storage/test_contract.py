"""The storage contract, run on every backend (MemoryStorage and RedisStorage).

Each test drives the public `Storage` methods and reads back what was (or was not) written.
The tests at the end are Redis-only: command count per checkpoint, the key layout, connection
failures, and several event loops sharing one storage object.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import pytest
import redis.asyncio

from reactorflow.errors import (
    ConfigurationError,
    LockLost,
    ReactorflowError,
    StorageConnectionError,
)
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ClaimResult
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.scans import PRUNE_BATCH
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import closed_port, redis_namespace, until_lock_lapses

OWNER = "owner-1"
OTHER = "owner-2"


def new_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


async def new_run(storage: Storage, run_id: str | None = None, *, reactor: str = "flow",
                  status: str = "running", owner: str = OWNER, lock_ttl: float = 10.0,
                  created_at: float | None = None, meta: bytes = b"meta",
                  state: bytes = b"state-0", events: Sequence[bytes] = ()) -> str:
    run_id = run_id or new_id()
    created = await storage.create_run(
        run_id, reactor=reactor, status=status, meta=meta, state=state,
        created_at=time.time() if created_at is None else created_at, owner=owner,
        lock_ttl=lock_ttl, events=events)
    assert created is True
    return run_id


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    """The storage on each backend in turn, the Redis Cluster included (the cluster lane)."""
    async for backend in on_every(request):
        yield backend


# -- create and load ---------------------------------------------------------------------------


async def test_create_then_load_round_trips_bytes(storage: Storage) -> None:
    meta, state = b"\x00\xffmeta\n", b"\x80state\x00"
    created_at = 1_700_000_000.123456
    run_id = await new_run(storage, meta=meta, state=state, created_at=created_at,
                           events=[b"e1", b"\x00e2"])

    head = await storage.load_head(run_id)
    assert head is not None
    assert (head.run_id, head.reactor, head.status) == (run_id, "flow", "running")
    assert (head.meta, head.state, head.created_at) == (meta, state, created_at)
    assert abs(head.touched_at - time.time()) < 5
    stored = await storage.load_run(run_id)
    assert stored is not None and stored.head == head and stored.steps == {}
    assert await storage.history(run_id) == [b"e1", b"\x00e2"]
    assert await storage.lock_owner(run_id) == OWNER


async def test_create_refuses_a_duplicate_id_and_writes_nothing(storage: Storage) -> None:
    run_id = await new_run(storage, events=[b"first"])
    before = await storage.load_head(run_id)

    again = await storage.create_run(run_id, reactor="other", status="paused", meta=b"x",
                                     state=b"y", created_at=1.0, owner=OTHER, lock_ttl=10.0,
                                     events=[b"second"])

    assert again is False
    assert await storage.load_head(run_id) == before
    assert await storage.history(run_id) == [b"first"]
    assert await storage.lock_owner(run_id) == OWNER
    assert (await storage.list_runs("other", None, 10, None)).heads == []


async def test_missing_run_reads_as_nothing(storage: Storage) -> None:
    missing = new_id()
    assert await storage.load_run(missing) is None
    assert await storage.load_head(missing) is None
    assert await storage.history(missing) == []
    assert await storage.claims(missing) == {}
    assert await storage.lock_owner(missing) is None


# -- fenced writes -----------------------------------------------------------------------------


async def test_save_step_writes_one_record_and_appends_events(storage: Storage) -> None:
    run_id = await new_run(storage, events=[b"created"])
    before = await storage.load_head(run_id)
    assert before is not None

    assert await storage.save_step(run_id, OWNER, "a", b"rec-a", [b"a.done"]) is None
    assert await storage.save_step(run_id, OWNER, "b", b"rec-b") is None
    assert await storage.save_step(run_id, OWNER, "a", b"rec-a2", [b"a.again"]) is None

    stored = await storage.load_run(run_id)
    assert stored is not None
    assert stored.steps == {"a": b"rec-a2", "b": b"rec-b"}
    assert stored.head.status == "running" and stored.head.state == b"state-0"
    assert stored.head.touched_at >= before.touched_at
    assert await storage.history(run_id) == [b"created", b"a.done", b"a.again"]


async def test_save_step_by_a_non_owner_is_refused_and_writes_nothing(storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_step(run_id, OWNER, "a", b"rec-a", [b"a.done"])
    before = await storage.load_run(run_id)

    with pytest.raises(LockLost) as caught:
        await storage.save_step(run_id, OTHER, "a", b"zombie", [b"zombie.event"])
    with pytest.raises(LockLost):
        await storage.save_step(run_id, OTHER, "b", b"zombie")

    assert caught.value.run_id == run_id and caught.value.owner == OTHER
    assert await storage.load_run(run_id) == before
    assert await storage.history(run_id) == [b"a.done"]


async def test_save_step_after_the_lock_expired_is_refused(storage: Storage) -> None:
    run_id = await new_run(storage, lock_ttl=1.0)
    await storage.save_step(run_id, OWNER, "a", b"rec-a")
    await until_lock_lapses(storage, run_id)

    with pytest.raises(LockLost):
        await storage.save_step(run_id, OWNER, "b", b"late", [b"late.event"])

    stored = await storage.load_run(run_id)
    assert stored is not None and stored.steps == {"a": b"rec-a"}
    assert await storage.history(run_id) == []
    # the new owner takes over and writes
    assert await storage.acquire_lock(run_id, OTHER, 5.0) is True
    assert await storage.save_step(run_id, OTHER, "b", b"new") is None
    with pytest.raises(LockLost):
        await storage.save_step(run_id, OWNER, "b", b"zombie")
    stored = await storage.load_run(run_id)
    assert stored is not None and stored.steps == {"a": b"rec-a", "b": b"new"}


async def test_save_step_on_a_missing_run_is_refused(storage: Storage) -> None:
    run_id = new_id()
    assert await storage.acquire_lock(run_id, OWNER, 5.0)
    with pytest.raises(LockLost):
        await storage.save_step(run_id, OWNER, "a", b"rec")
    assert await storage.load_run(run_id) is None


async def test_save_state_writes_status_state_steps_and_events(storage: Storage) -> None:
    run_id = await new_run(storage, events=[b"created"])

    control = await storage.save_state(
        run_id, OWNER, status="paused", previous_status="running", state=b"state-1",
        steps={"a": b"rec-a", "b": b"rec-b"}, events=[b"paused"])

    assert control is None
    stored = await storage.load_run(run_id)
    assert stored is not None
    assert (stored.head.status, stored.head.state) == ("paused", b"state-1")
    assert stored.head.meta == b"meta"
    assert stored.steps == {"a": b"rec-a", "b": b"rec-b"}
    assert await storage.history(run_id) == [b"created", b"paused"]
    paused = await storage.list_runs("flow", "paused", 10, None)
    assert [h.run_id for h in paused.heads] == [run_id]
    assert (await storage.list_runs("flow", "running", 10, None)).heads == []


async def test_save_state_by_a_non_owner_is_refused_and_writes_nothing(storage: Storage) -> None:
    run_id = await new_run(storage, events=[b"created"])
    assert await storage.request_control(run_id, b"cancel")
    before = await storage.load_run(run_id)

    async with storage.subscribe(run_id) as subscription:
        with pytest.raises(LockLost):
            await storage.save_state(run_id, OTHER, status="completed", previous_status="running",
                                     state=b"zombie", steps={"a": b"zombie"},
                                     events=[b"zombie"], clear_control=True, publish=True)
        assert await subscription.wait(0.3) is False  # no notification either

    assert await storage.load_run(run_id) == before
    assert await storage.history(run_id) == [b"created"]
    assert await storage.save_step(run_id, OWNER, "x", b"x") == b"cancel"  # control kept
    running = await storage.list_runs("flow", "running", 10, None)
    assert [h.run_id for h in running.heads] == [run_id]
    assert (await storage.list_runs("flow", "completed", 10, None)).heads == []


async def test_save_state_publishes_only_when_asked(storage: Storage) -> None:
    run_id = await new_run(storage)
    async with storage.subscribe(run_id) as subscription:
        await storage.save_state(run_id, OWNER, status="running", previous_status="running",
                                 state=b"s1")
        assert await subscription.wait(0.3) is False
        await storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                                 state=b"s2", publish=True)
        assert await subscription.wait(5.0) is True
        head = await storage.load_head(run_id)  # the record was written before the signal
        assert head is not None and head.status == "completed"


# -- liveness lock -----------------------------------------------------------------------------


async def test_lock_is_reentrant_for_its_owner(storage: Storage) -> None:
    lock = new_id()
    assert await storage.acquire_lock(lock, OWNER, 5.0) is True
    assert await storage.acquire_lock(lock, OWNER, 5.0) is True
    assert await storage.lock_owner(lock) == OWNER
    assert await storage.release_lock(lock, OWNER) == 1
    assert await storage.lock_owner(lock) == OWNER
    assert await storage.release_lock(lock, OWNER) == 0
    assert await storage.lock_owner(lock) is None
    assert await storage.release_lock(lock, OWNER) == -1
    assert await storage.acquire_lock(lock, OTHER, 5.0) is True


async def test_lock_refuses_another_owner(storage: Storage) -> None:
    lock = f"{new_id()}:unit-step"  # a unit lock name works like a run's
    assert await storage.acquire_lock(lock, OWNER, 5.0)
    assert await storage.acquire_lock(lock, OTHER, 5.0) is False
    assert await storage.extend_lock(lock, OTHER, 5.0) is False
    assert await storage.release_lock(lock, OTHER) == -1
    assert await storage.lock_owner(lock) == OWNER
    assert await storage.release_lock(lock, OWNER) == 0  # count untouched by the refusals


async def test_lock_expires_after_its_ttl(storage: Storage) -> None:
    lock = new_id()
    assert await storage.acquire_lock(lock, OWNER, 1.0)
    assert await storage.acquire_lock(lock, OTHER, 5.0) is False
    await until_lock_lapses(storage, lock)  # nobody extended it
    assert await storage.extend_lock(lock, OWNER, 5.0) is False
    assert await storage.acquire_lock(lock, OTHER, 5.0) is True
    assert await storage.release_lock(lock, OWNER) == -1


async def test_extend_keeps_the_lock_past_its_first_ttl(storage: Storage) -> None:
    lock = new_id()
    first_ttl_over = time.monotonic() + 1.0
    assert await storage.acquire_lock(lock, OWNER, 1.0)
    assert await storage.extend_lock(lock, OWNER, 10.0) is True
    while time.monotonic() <= first_ttl_over:  # past the first TTL
        await asyncio.sleep(0.02)
    assert await storage.lock_owner(lock) == OWNER
    assert await storage.acquire_lock(lock, OTHER, 5.0) is False


async def test_create_run_takes_the_lock_once(storage: Storage) -> None:
    run_id = await new_run(storage)
    assert await storage.acquire_lock(run_id, OTHER, 5.0) is False
    assert await storage.release_lock(run_id, OWNER) == 0
    assert await storage.lock_owner(run_id) is None


# -- control requests --------------------------------------------------------------------------


async def test_control_request_first_wins_returned_then_cleared(storage: Storage) -> None:
    run_id = await new_run(storage)
    assert await storage.request_control(new_id(), b"cancel") is False  # no such run

    assert await storage.request_control(run_id, b"cancel:first") is True
    assert await storage.request_control(run_id, b"fail:second") is False
    assert await storage.save_step(run_id, OWNER, "a", b"rec") == b"cancel:first"
    kept = await storage.save_state(run_id, OWNER, status="running", previous_status="running",
                                    state=b"s")
    assert kept == b"cancel:first"

    cleared = await storage.save_state(run_id, OWNER, status="cancelled",
                                       previous_status="running", state=b"s",
                                       clear_control=True)
    assert cleared is None
    assert await storage.save_step(run_id, OWNER, "b", b"rec") is None
    assert await storage.request_control(run_id, b"again") is True


# -- claims, counters, correlation, idempotency ------------------------------------------------


async def test_claim_first_wins(storage: Storage) -> None:
    run_id = await new_run(storage, status="paused")
    assert await storage.claim(run_id, "approve", b"payload-1") is ClaimResult.ACCEPTED
    assert await storage.claim(run_id, "approve", b"payload-2") is ClaimResult.TAKEN
    assert await storage.claim(run_id, "approve", b"payload-1") is ClaimResult.TAKEN
    assert await storage.claim(run_id, "ship", b"payload-3") is ClaimResult.ACCEPTED
    assert await storage.claims(run_id) == {"approve": b"payload-1", "ship": b"payload-3"}


@pytest.mark.parametrize("status", ["completed", "failed", "halted", "cancelled", "aborted",
                                    "rolling_back"])
async def test_claim_refused_unless_paused_or_running(storage: Storage, status: str) -> None:
    run_id = await new_run(storage, status=status)
    assert await storage.claim(run_id, "approve", b"p") is ClaimResult.NOT_RESUMABLE
    assert await storage.claims(run_id) == {}


async def test_claim_refused_on_a_missing_run_or_a_pending_control(storage: Storage) -> None:
    assert await storage.claim(new_id(), "approve", b"p") is ClaimResult.NOT_RESUMABLE
    running = await new_run(storage, status="running")
    assert await storage.claim(running, "approve", b"p") is ClaimResult.ACCEPTED
    cancelled = await new_run(storage, status="paused")
    assert await storage.request_control(cancelled, b"cancel")
    assert await storage.claim(cancelled, "approve", b"p") is ClaimResult.NOT_RESUMABLE
    assert await storage.claims(cancelled) == {}


async def test_taken_is_answered_before_the_status_check(storage: Storage) -> None:
    run_id = await new_run(storage, status="paused")
    assert await storage.claim(run_id, "approve", b"p1") is ClaimResult.ACCEPTED
    await storage.save_state(run_id, OWNER, status="completed", previous_status="paused",
                             state=b"done")
    assert await storage.request_control(run_id, b"cancel")
    assert await storage.claim(run_id, "approve", b"p2") is ClaimResult.TAKEN
    assert await storage.claim(run_id, "other", b"p3") is ClaimResult.NOT_RESUMABLE


async def test_fifty_concurrent_claims_accept_exactly_one(storage: Storage) -> None:
    run_id = await new_run(storage, status="paused")
    results = await asyncio.gather(
        *(storage.claim(run_id, "approve", f"payload-{i}".encode()) for i in range(50)))
    accepted = [i for i, result in enumerate(results) if result is ClaimResult.ACCEPTED]
    assert len(accepted) == 1
    assert results.count(ClaimResult.TAKEN) == 49
    assert await storage.claims(run_id) == {"approve": f"payload-{accepted[0]}".encode()}


async def test_counters_count_per_name(storage: Storage) -> None:
    run_id = await new_run(storage)
    assert [await storage.incr_counter(run_id, "invalid") for _ in range(3)] == [1, 2, 3]
    assert await storage.incr_counter(run_id, "other") == 1
    assert await storage.incr_counter(new_id(), "invalid") == 0  # no run, nothing counted


async def test_concurrent_increments_are_not_lost(storage: Storage) -> None:
    run_id = await new_run(storage)
    values = await asyncio.gather(*(storage.incr_counter(run_id, "n") for _ in range(30)))
    assert sorted(values) == list(range(1, 31))


async def test_correlation_first_wins_per_reactor(storage: Storage) -> None:
    first, second = new_id(), new_id()
    correlation = f"approval:{uuid.uuid4().hex}"
    assert await storage.resolve_correlation("flow", correlation) is None
    assert await storage.map_correlation("flow", correlation, first) == first
    assert await storage.map_correlation("flow", correlation, second) == first
    assert await storage.map_correlation("flow", correlation, first) == first
    assert await storage.resolve_correlation("flow", correlation) == first
    assert await storage.map_correlation("other-flow", correlation, second) == second
    assert await storage.resolve_correlation("other-flow", correlation) == second
    assert await storage.resolve_correlation("flow", correlation) == first


async def test_correlation_release_is_compare_and_delete(storage: Storage) -> None:
    first, second = new_id(), new_id()
    correlation = f"approval:{uuid.uuid4().hex}"
    await storage.map_correlation("flow", correlation, first)
    assert await storage.release_correlation("flow", correlation, second) is False
    assert await storage.release_correlation("other-flow", correlation, first) is False
    assert await storage.resolve_correlation("flow", correlation) == first
    assert await storage.release_correlation("flow", correlation, first) is True
    assert await storage.release_correlation("flow", correlation, first) is False
    assert await storage.resolve_correlation("flow", correlation) is None
    assert await storage.map_correlation("flow", correlation, second) == second


async def test_idempotency_key_first_wins_per_reactor(storage: Storage) -> None:
    first, second = new_id(), new_id()
    key = f"order-{uuid.uuid4().hex}"
    assert await storage.claim_idempotency("flow", key, first) == first
    assert await storage.claim_idempotency("flow", key, second) == first
    assert await storage.claim_idempotency("other-flow", key, second) == second


async def test_idempotency_release_is_compare_and_delete(storage: Storage) -> None:
    first, second = new_id(), new_id()
    key = f"order-{uuid.uuid4().hex}"
    await storage.claim_idempotency("flow", key, first)
    assert await storage.release_idempotency("flow", key, second) is False
    assert await storage.claim_idempotency("flow", key, second) == first
    assert await storage.release_idempotency("flow", key, first) is True
    assert await storage.claim_idempotency("flow", key, second) == second


async def test_create_run_is_refused_while_another_owner_holds_the_lock(
        storage: Storage) -> None:
    run_id = new_id()
    assert await storage.acquire_lock(run_id, "someone-else", 10.0)
    created = await storage.create_run(
        run_id, reactor="flow", status="running", meta=b"meta", state=b"state-0",
        created_at=time.time(), owner=OWNER, lock_ttl=10.0)
    assert created is False
    assert await storage.load_head(run_id) is None
    assert await storage.lock_owner(run_id) == "someone-else"
    mine = new_id()
    assert await storage.acquire_lock(mine, OWNER, 10.0)  # taken before: kept, count 1
    assert await new_run(storage, run_id=mine) == mine
    assert await storage.lock_owner(mine) == OWNER
    assert await storage.release_lock(mine, OWNER) == 0


# -- retention and history bound ---------------------------------------------------------------

RETENTION = 1.5
"""Seconds: long enough that a loaded machine's delays (tenths of a second) never decide."""


async def _until(moment: float) -> None:
    while time.monotonic() <= moment:
        await asyncio.sleep(0.02)



async def test_an_ended_run_expires_retention_after_the_write_that_ended_it(
        factory: Callable[..., Storage]) -> None:
    """Real time, end to end (storage/contract/storage.py; tests/storage/test_retention.py checks
    every part of the rule without waiting): the run goes, all of it, and its id is free again."""
    storage = factory(retention=RETENTION)
    run_id = await new_run(storage, events=[b"e"], lock_ttl=RETENTION * 20)
    assert await storage.claim(run_id, "approve", b"p") is ClaimResult.ACCEPTED
    assert await storage.incr_counter(run_id, "n") == 1
    await storage.save_step(run_id, OWNER, "a", b"rec")
    await _until(time.monotonic() + RETENTION * 1.1)  # live: kept past the retention
    assert (await storage.load_run(run_id)) is not None
    await storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                             state=b"s", release=True)
    with anyio.fail_after(RETENTION + 30):
        while await storage.load_run(run_id) is not None:
            await asyncio.sleep(0.05)

    assert await storage.load_run(run_id) is None
    assert await storage.load_head(run_id) is None
    assert await storage.history(run_id) == []
    assert await storage.claims(run_id) == {}
    assert await storage.incr_counter(run_id, "n") == 0
    assert (await storage.list_runs("flow", None, 10, None)).heads == []
    assert await storage.scan_status(["completed"], 10) == []
    # the id is free again, and nothing of the old run leaks into the new one
    await new_run(storage, run_id, owner=OTHER, events=[b"new"])
    stored = await storage.load_run(run_id)
    assert stored is not None and stored.steps == {}
    assert await storage.history(run_id) == [b"new"]
    assert await storage.incr_counter(run_id, "n") == 1


async def test_history_keeps_the_newest_events_up_to_the_limit(
        factory: Callable[..., Storage]) -> None:
    storage = factory(history_limit=5)
    run_id = await new_run(storage, events=[b"1", b"2"])
    await storage.save_step(run_id, OWNER, "a", b"rec", [b"3", b"4", b"5", b"6"])
    assert await storage.history(run_id) == [b"2", b"3", b"4", b"5", b"6"]
    await storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                             state=b"s", events=[b"7", b"8"])
    assert await storage.history(run_id) == [b"4", b"5", b"6", b"7", b"8"]
    assert await storage.save_unit(run_id, "unit", b"rec", [b"9"])
    assert await storage.history(run_id) == [b"5", b"6", b"7", b"8", b"9"]


@pytest.mark.parametrize(("options", "named"), [
    ({"retention": -5}, "retention"), ({"retention": 0}, "retention"),
    ({"retention": float("inf")}, "retention"), ({"retention": "7d"}, "retention"),
    ({"history_limit": 0}, "history_limit"), ({"history_limit": 2.5}, "history_limit"),
    ({"history_limit": True}, "history_limit"),
])
async def test_out_of_range_options_are_refused_naming_the_parameter(
        factory: Callable[..., Storage], options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        factory(**options)
    assert caught.value.option == named
    assert f"{named}={next(iter(options.values()))!r}" in str(caught.value)


async def test_memory_keeps_at_most_max_terminal_runs_evicting_the_oldest_ended() -> None:
    storage = MemoryStorage(max_terminal_runs=3)
    running = await new_run(storage)
    paused = await new_run(storage, status="paused")
    aborted = await new_run(storage, status="aborted")  # terminal, its undo owed: not ended
    ended = []
    for _ in range(5):
        run_id = await new_run(storage)
        await storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                                 state=b"s", release=True)
        ended.append(run_id)
    # undo of an ended run makes it non-terminal again: never evicted while rolling back
    assert await storage.acquire_lock(ended[2], OWNER, 10.0)
    await storage.save_state(ended[2], OWNER, status="rolling_back", previous_status="completed",
                             state=b"s")

    kept = [r for r in ended if await storage.load_head(r) is not None]
    assert kept == ended[2:]  # the two that ended first went
    for _ in range(4):
        run_id = await new_run(storage)
        await storage.save_state(run_id, OWNER, status="failed", previous_status="running",
                                 state=b"s")
    assert await storage.load_head(running) is not None
    assert await storage.load_head(paused) is not None
    assert await storage.load_head(aborted) is not None  # never evicted for room
    assert await storage.load_head(ended[2]) is not None  # rolling back: kept
    assert [r for r in ended if await storage.load_head(r) is not None] == [ended[2]]
    assert len((await storage.list_runs("flow", "failed", 100, None)).heads) == 3


def test_memory_max_terminal_runs_has_a_documented_default_and_is_validated() -> None:
    assert MemoryStorage().max_terminal_runs == 10_000
    with pytest.raises(ConfigurationError, match="max_terminal_runs=0"):
        MemoryStorage(max_terminal_runs=0)


# -- listing and sweeping ----------------------------------------------------------------------


async def _pages(storage: Storage, reactor: str | None, status: str | None,
                 limit: int) -> list[str]:
    """Every page of a listing (of every reactor when `reactor` is None), checked as it goes."""
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        page = await storage.list_runs(reactor, status, limit, cursor)
        assert len(page.heads) <= limit
        assert reactor is None or all(h.reactor == reactor for h in page.heads)
        assert status is None or all(h.status == status for h in page.heads)
        seen += [h.run_id for h in page.heads]
        if page.next_cursor is None:
            return seen
        assert len(page.heads) == limit
        cursor = page.next_cursor
    raise AssertionError("paging did not end")


async def test_list_runs_pages_newest_first_with_a_status_filter(storage: Storage) -> None:
    reactor = f"flow-{uuid.uuid4().hex[:6]}"
    created = [100.0, 101.0, 101.0, 101.0, 102.5, 103.0, 104.0, 104.0, 105.0]
    runs = [await new_run(storage, reactor=reactor, created_at=at) for at in created]
    await new_run(storage, reactor=f"{reactor}-other", created_at=106.0)
    completed = set(runs[1::2])
    for run_id in completed:
        await storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                                 state=b"done")
    expected = [r for _, r in sorted(zip(created, runs, strict=True), reverse=True)]

    for limit in (1, 2, 3, 4, 20):
        assert await _pages(storage, reactor, None, limit) == expected
        assert await _pages(storage, reactor, "completed", limit) == [
            r for r in expected if r in completed]
        assert await _pages(storage, reactor, "running", limit) == [
            r for r in expected if r not in completed]
    assert await _pages(storage, reactor, "paused", 5) == []
    assert await _pages(storage, f"{reactor}-none", None, 5) == []

    page = await storage.list_runs(reactor, None, 3, None)
    assert [h.created_at for h in page.heads] == [105.0, 104.0, 104.0]
    assert page.heads[0].state == b"state-0" and page.heads[0].meta == b"meta"


async def test_list_runs_pages_through_many_runs_created_at_the_same_time(
        storage: Storage) -> None:
    reactor = f"flow-{uuid.uuid4().hex[:6]}"
    runs = [await new_run(storage, reactor=reactor, created_at=500.0) for _ in range(45)]
    await new_run(storage, reactor=reactor, created_at=400.0)
    pages = await _pages(storage, reactor, None, 5)
    assert pages[:45] == sorted(runs, reverse=True)
    assert len(pages) == 46 and len(set(pages)) == 46


async def test_list_runs_of_every_reactor_merges_them_newest_first(storage: Storage) -> None:
    created = [(100.0, "a"), (101.0, "b"), (101.0, "a"), (101.0, "c"), (102.0, "b"),
               (103.0, "a"), (103.0, "c"), (104.0, "c"), (105.0, "a")]
    runs = [(at, await new_run(storage, reactor=f"merge-{name}", created_at=at))
            for at, name in created]
    completed = {run_id for _, run_id in runs[::3]}
    for run_id in completed:
        await storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                                 state=b"done")
    expected = [r for _, r in sorted(runs, reverse=True)]
    for limit in (1, 2, 4, 20):
        assert await _pages(storage, None, None, limit) == expected
        assert await _pages(storage, None, "completed", limit) == [
            r for r in expected if r in completed]
        assert await _pages(storage, None, "running", limit) == [
            r for r in expected if r not in completed]
    assert await _pages(storage, None, "paused", 3) == []
    page = await storage.list_runs(None, None, 2, None)
    assert [(h.reactor, h.created_at) for h in page.heads] == [("merge-a", 105.0),
                                                               ("merge-c", 104.0)]


async def test_list_runs_of_every_reactor_is_empty_without_runs(storage: Storage) -> None:
    page = await storage.list_runs(None, None, 10, None)
    assert page.heads == [] and page.next_cursor is None


async def test_list_runs_rejects_a_foreign_cursor(storage: Storage) -> None:
    with pytest.raises(ReactorflowError):
        await storage.list_runs("flow", None, 5, "!!not-a-cursor!!")


async def test_scan_status_finds_runs_of_every_reactor_with_liveness(storage: Storage) -> None:
    reactor = f"flow-{uuid.uuid4().hex[:6]}"
    held = await new_run(storage, reactor=reactor)
    free = await new_run(storage, reactor=f"{reactor}-b", owner=OTHER)
    assert await storage.release_lock(free, OTHER) == 0
    paused = await new_run(storage, reactor=reactor)
    await storage.save_state(paused, OWNER, status="paused", previous_status="running",
                             state=b"s")
    done = await new_run(storage, reactor=f"{reactor}-b")
    await storage.save_state(done, OWNER, status="completed", previous_status="running",
                             state=b"s")

    found = {live.run_id: live for live in await storage.scan_status(["running", "paused"], 100)}
    mine = {run_id: found[run_id] for run_id in (held, free, paused) if run_id in found}
    assert set(mine) == {held, free, paused}
    assert done not in found
    assert (mine[held].reactor, mine[held].status, mine[held].lock_owner) == (
        reactor, "running", OWNER)
    assert (mine[free].reactor, mine[free].status, mine[free].lock_owner) == (
        f"{reactor}-b", "running", None)
    assert mine[paused].status == "paused"
    head = await storage.load_head(paused)
    assert head is not None and mine[paused].touched_at == head.touched_at
    assert len(await storage.scan_status(["running", "paused"], 2)) == 2
    assert [live.run_id for live in await storage.scan_status(["completed"], 100)] == [done]



async def test_scan_status_says_which_runs_lock_lapsed(storage: Storage) -> None:
    """A lock taken and never released that expired is `lapsed` (its holder died); a lock
    released (by `release_lock` or the final save), or still held, is not — also when the run
    was taken on again after a lapse, or a run's lock was re-entered and left once."""
    reactor = f"flow-{uuid.uuid4().hex[:6]}"
    died = await new_run(storage, reactor=reactor, lock_ttl=0.5)  # created holding its lock
    taken = await new_run(storage, reactor=reactor, owner=OTHER)
    assert await storage.release_lock(taken, OTHER) == 0
    assert await storage.acquire_lock(taken, OWNER, 0.5)  # taken again, then it lapses
    released = await new_run(storage, reactor=reactor, owner=OTHER)
    assert await storage.release_lock(released, OTHER) == 0
    saved = await new_run(storage, reactor=reactor)
    await storage.save_state(saved, OWNER, status="running", previous_status="running",
                             state=b"s", release=True)
    held = await new_run(storage, reactor=reactor)
    assert await storage.acquire_lock(held, OWNER, 10.0)  # re-entered, left once: still held
    assert await storage.release_lock(held, OWNER) == 1
    resumed = await new_run(storage, reactor=reactor, lock_ttl=0.5)
    for run_id in (died, taken, resumed):
        await until_lock_lapses(storage, run_id)
    assert await storage.acquire_lock(resumed, OTHER, 10.0)  # taken over after the lapse...
    assert await storage.release_lock(resumed, OTHER) == 0  # ...and left cleanly

    found = {live.run_id: live for live in await storage.scan_status(["running"], 1000)}
    lapsed = {run_id for run_id in (died, taken, released, saved, held, resumed)
              if found[run_id].lapsed}
    assert lapsed == {died, taken}
    assert found[held].lock_owner == OWNER and found[died].lock_owner is None


async def test_lock_and_load_takes_the_lock_then_reads_the_run(storage: Storage) -> None:
    """Lock, then load, in one call: taken, it reads what `load_run` would (history and claims
    included); held by another owner, it reads and changes nothing."""
    run_id = await new_run(storage, owner=OTHER, events=[b"started"])
    assert await storage.claim(run_id, "approve", b"yes") is ClaimResult.ACCEPTED

    assert await storage.lock_and_load(run_id, OWNER, 10.0) == (False, None)
    assert await storage.lock_owner(run_id) == OTHER
    assert await storage.release_lock(run_id, OTHER) == 0

    held, stored = await storage.lock_and_load(run_id, OWNER, 10.0)
    assert held is True and await storage.lock_owner(run_id) == OWNER
    assert stored == await storage.load_run(run_id, history=True, claims=True)
    assert stored is not None and stored.claims == {"approve": b"yes"}
    assert stored.history == [b"started"]
    assert await storage.release_lock(run_id, OWNER) == 0  # taken once (count 1)
    assert await storage.lock_and_load("run-none-such", OWNER, 10.0) == (True, None)

# -- async units and notification --------------------------------------------------------------


async def test_save_unit_writes_the_record_then_publishes_on_its_topic(storage: Storage) -> None:
    run_id = await new_run(storage)
    async with storage.subscribe(run_id, "send_receipt") as unit, \
            storage.subscribe(run_id) as completion:
        assert await storage.save_unit(run_id, "send_receipt", b"receipt", [b"unit.done"])
        assert await unit.wait(5.0) is True
        assert unit.message == b"receipt"  # the notification carries the record
        stored = await storage.load_run(run_id)
        assert stored is not None and stored.steps == {"send_receipt": b"receipt"}
        assert await completion.wait(0.2) is False  # other channels are not woken
    assert await storage.history(run_id) == [b"unit.done"]
    # unfenced: a unit writes although another execution holds the run's lock
    assert await storage.lock_owner(run_id) == OWNER


async def test_save_unit_on_a_missing_run_writes_nothing(storage: Storage) -> None:
    run_id = new_id()
    async with storage.subscribe(run_id, "unit") as subscription:
        assert await storage.save_unit(run_id, "unit", b"rec", [b"e"]) is False
        assert await subscription.wait(0.2) is False
    assert await storage.load_run(run_id) is None
    assert await storage.history(run_id) == []


async def test_wait_times_out_without_a_notification(storage: Storage) -> None:
    run_id = await new_run(storage)
    async with storage.subscribe(run_id) as subscription:
        started = time.monotonic()
        assert await subscription.wait(0.25) is False
        assert 0.2 <= time.monotonic() - started < 2.0
        await storage.publish(new_id())  # another run's channel
        assert await subscription.wait(0.2) is False


async def test_a_notification_sent_before_wait_is_not_lost(storage: Storage) -> None:
    run_id = await new_run(storage)
    async with storage.subscribe(run_id) as subscription:
        for _ in range(3):
            await storage.publish(run_id)
        await asyncio.sleep(0.2)
        started = time.monotonic()
        assert await subscription.wait(5.0) is True
        assert time.monotonic() - started < 1.0
        assert await subscription.wait(0.2) is False  # the three coalesced into one wake-up


async def test_publish_from_another_thread_and_loop_wakes_a_subscriber(storage: Storage) -> None:
    run_id = await new_run(storage)
    async with storage.subscribe(run_id) as subscription:
        assert await subscription.wait(0.05) is False
        errors: list[BaseException] = []

        def publisher() -> None:
            try:
                anyio.run(storage.publish, run_id)  # a fresh event loop in this thread
            except BaseException as exc:  # reported below
                errors.append(exc)

        thread = threading.Thread(target=publisher)
        thread.start()
        woke = await subscription.wait(5.0)
        await asyncio.to_thread(thread.join, 5.0)
        assert errors == []
        assert woke is True
        assert await subscription.wait(0.1) is False  # one notification, one wake-up


async def test_one_storage_serves_several_threads_and_loops(storage: Storage) -> None:
    results: dict[int, list[str]] = {}

    async def worker(n: int) -> None:
        run_id = await new_run(storage, reactor="threads", owner=f"w{n}")
        await storage.save_step(run_id, f"w{n}", "a", f"rec-{n}".encode())
        stored = await storage.load_run(run_id)
        assert stored is not None
        results[n] = [stored.steps["a"].decode()]

    def in_thread(n: int) -> None:
        for _ in range(2):  # a fresh loop per anyio.run, twice
            anyio.run(worker, n)

    threads = [threading.Thread(target=in_thread, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        await asyncio.to_thread(thread.join, 20.0)
    assert results == {n: [f"rec-{n}"] for n in range(4)}
    # and the test's own loop still works
    assert await storage.load_head(new_id()) is None


# -- Redis only --------------------------------------------------------------------------------


@pytest.fixture
async def redis_storage(redis_url: str) -> AsyncIterator[RedisStorage]:
    backend = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    try:
        yield backend
    finally:
        await backend.aclose()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


async def _commands_during(redis_url: str, action: Callable[[], Any]) -> list[dict[str, Any]]:
    """Every command the server ran while `action` ran (MONITOR), up to a sentinel."""
    sentinel = f"sentinel-{uuid.uuid4().hex}"
    seen: list[dict[str, Any]] = []
    watcher = redis.asyncio.Redis.from_url(redis_url)
    probe = redis.asyncio.Redis.from_url(redis_url)
    try:
        await probe.ping()  # connected (HELLO etc.) before the window opens
        async with watcher.monitor() as monitor:
            await action()
            await probe.echo(sentinel)
            while True:
                command = dict(await monitor.next_command())
                if sentinel in command["command"]:
                    return seen
                seen.append(command)
    finally:
        await probe.aclose()
        await watcher.aclose()


async def test_redis_save_step_is_one_command_writing_one_field(
        redis_storage: RedisStorage, redis_url: str) -> None:
    run_id = await new_run(redis_storage)
    for i in range(300):  # many steps already stored: the cost must not depend on them
        await redis_storage.save_step(run_id, OWNER, f"step-{i}", b"x" * 100)

    seen = await _commands_during(
        redis_url, lambda: redis_storage.save_step(run_id, OWNER, "step-300", b"new", [b"ev"]))

    from_client = [c["command"] for c in seen if c["client_type"] != "lua"]
    assert len(from_client) == 1, from_client
    assert from_client[0].upper().startswith("EVALSHA")
    steps_key = f"{redis_storage._keys.ns}:steps:{{{run_id}}}"
    on_steps = [c["command"] for c in seen
                if c["client_type"] == "lua" and steps_key in c["command"]]
    # HSET of the one record: no read, no rewrite, and no TTL write (the hash got the run's
    # expiry horizon when it was created; storage/contract/storage.py, scripts/lib/run_write.lua)
    assert len(on_steps) == 1, on_steps
    assert on_steps[0].startswith(f"HSET {steps_key} step-300 new")


@pytest.mark.parametrize("known", [True, False], ids=["facts-known", "facts-unknown"])
async def test_redis_a_final_save_frees_its_gates_in_the_script_that_writes_its_state(
        redis_storage: RedisStorage, redis_url: str, known: bool) -> None:
    """On one node the final save and its gates' release are one script (`save_release`):
    atomic, so nobody sees the new state with the gates held, nor the gates free before the
    state is written (save before release); the release comes after the write, so a refused
    save releases nothing."""
    run_id = await new_run(redis_storage)
    # a process that did not create the run knows nothing of it (the other save path)
    saver = redis_storage if known else RedisStorage.from_url(
        redis_url, namespace=redis_storage._keys.ns)
    key = f"gate:{uuid.uuid4().hex[:10]}"
    await redis_storage.gate_acquire(key, run_id, limit=1, ttl=10)
    try:  # a first save (releasing a gate it does not hold) loads the script (NOSCRIPT)
        await saver.save_state(run_id, OWNER, status="running", previous_status="running",
                               state=b"busy", gates=[(f"{key}-other", run_id)])
        seen = await _commands_during(redis_url, lambda: saver.save_state(
            run_id, OWNER, status="completed", previous_status="running", state=b"done",
            release=True, publish=True, gates=[(key, run_id)]))
    finally:
        if saver is not redis_storage:
            await saver.aclose()
    from_client = [c["command"] for c in seen if c["client_type"] != "lua"]
    assert len(from_client) == 1 and from_client[0].startswith("EVALSHA"), from_client
    in_lua = [c["command"] for c in seen if c["client_type"] == "lua"]
    holders = redis_storage._gate(key, "holders")
    run_key = redis_storage._keys.run(run_id)
    freed = next(i for i, c in enumerate(in_lua) if holders in c)
    written = next(i for i, c in enumerate(in_lua) if c.startswith(f"HSET {run_key} "))
    assert written < freed, in_lua
    assert await redis_storage.gate_holders(key) == []


async def test_redis_keys_share_the_run_hash_tag_and_carry_ttls(
        redis_storage: RedisStorage, raw: redis.asyncio.Redis) -> None:
    ns = redis_storage._keys.ns
    run_id = await new_run(redis_storage, events=[b"e"])
    await redis_storage.save_step(run_id, OWNER, "a", b"rec")
    await redis_storage.claim(run_id, "approve", b"p")
    await redis_storage.incr_counter(run_id, "n")
    await redis_storage.request_control(run_id, b"cancel")
    await redis_storage.map_correlation("flow", "corr-1", run_id)
    await redis_storage.claim_idempotency("flow", "my key: anything", run_id)

    keys = sorted(k.decode() if isinstance(k, bytes) else k for k in await raw.keys(f"{ns}:*"))
    tagged = [k for k in keys if f"{{{run_id}}}" in k]
    assert {k.split(":")[1] for k in tagged} == {
        "run", "steps", "hist", "ctl", "claims", "ctr", "tok", "lock"}
    assert all(k.endswith(f"{{{run_id}}}") for k in tagged)
    glob = set(keys) - set(tagged)
    assert f"{ns}:reactors" in glob
    assert any(k.startswith(f"{ns}:corr:flow:") and len(k.rsplit(":", 1)[1]) == 64 for k in glob)
    assert any(k.startswith(f"{ns}:idem:flow:") and len(k.rsplit(":", 1)[1]) == 64 for k in glob)
    # a live run's keys carry no TTL, its lock its own (storage/contract/storage.py)
    for key in tagged:
        ttl = await raw.pttl(key)
        assert (0 < ttl <= 10_000) if ":lock:" in key else ttl == -1, (key, ttl)
    await redis_storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                                   state=b"s")
    retention = redis_storage.retention * 1000
    for key in tagged:  # ended: all of it expires in `retention`
        ttl = await raw.pttl(key)
        assert 0 < ttl <= (10_000 if ":lock:" in key else retention), (key, ttl)
    corr = next(k for k in glob if k.startswith(f"{ns}:corr:flow:"))
    assert await raw.pttl(corr) == -1  # released by the engine when its run ends, no TTL


async def test_redis_refused_connection_names_the_url_without_credentials() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    backend = RedisStorage.from_url(f"redis://user:s3cr3t-pw@127.0.0.1:{port}/0",
                                    namespace="refused")
    assert "s3cr3t" not in backend.describe() and f"127.0.0.1:{port}" in backend.describe()
    started = time.monotonic()
    with pytest.raises(StorageConnectionError) as caught:
        await backend.load_head("any")
    assert time.monotonic() - started < 10  # bounded retries
    assert caught.value.url == f"redis://127.0.0.1:{port}/0"
    assert caught.value.url in str(caught.value)
    assert "s3cr3t" not in str(caught.value) and "s3cr3t" not in repr(caught.value)
    assert "user" not in caught.value.url
    with pytest.raises(StorageConnectionError):
        await backend.save_step("any", OWNER, "a", b"rec")
    await backend.aclose()


async def test_redis_index_entries_are_hints_verified_by_readers(
        redis_storage: RedisStorage, raw: redis.asyncio.Redis) -> None:
    keys = redis_storage._keys
    run_id = await new_run(redis_storage, reactor="hints")
    ghost = new_id()  # an index entry whose run is gone
    await raw.zadd(keys.by_reactor("hints"), {ghost: 1.0})
    await raw.zadd(keys.by_status("hints", "paused"), {run_id: 2.0, ghost: 1.0})

    assert [h.run_id for h in (await redis_storage.list_runs("hints", None, 10, None)).heads] == [
        run_id]
    assert (await redis_storage.list_runs("hints", "paused", 10, None)).heads == []
    assert all(live.run_id not in (ghost,)
               for live in await redis_storage.scan_status(["paused"], 100))
    # stale members were dropped, live ones kept
    assert await raw.zscore(keys.by_reactor("hints"), ghost) is None
    assert await raw.zcard(keys.by_status("hints", "paused")) == 0
    assert await raw.zscore(keys.by_status("hints", "running"), run_id) is not None


async def test_redis_scan_status_prunes_index_members_of_expired_runs(
        redis_storage: RedisStorage, raw: redis.asyncio.Redis) -> None:
    keys = redis_storage._keys
    old_but_alive = await new_run(redis_storage, reactor="prune", created_at=10.0)
    await redis_storage.save_state(old_but_alive, OWNER, status="completed",
                                   previous_status="running", state=b"s")
    ghosts = {new_id(): float(i) for i in range(5)}  # runs that expired long ago
    await raw.zadd(keys.by_reactor("prune"), ghosts)
    await raw.zadd(keys.by_status("prune", "completed"), ghosts)

    await redis_storage.scan_status(["running"], 10)  # the sweeper's call

    for index in (keys.by_reactor("prune"), keys.by_status("prune", "completed")):
        assert [m.decode() for m in await raw.zrange(index, 0, -1)] == [old_but_alive]


async def test_redis_pruning_reaches_expired_members_behind_old_live_runs(
        redis_storage: RedisStorage, raw: redis.asyncio.Redis) -> None:
    """A run that has not ended never expires however old it is: more of them than one batch
    at the front of an index must not keep the pruning from the expired members behind."""
    keys = redis_storage._keys
    index = keys.by_reactor("old")
    old_live = {new_id(): float(i) for i in range(PRUNE_BATCH + 20)}  # created long ago
    for run_id, created in old_live.items():
        await new_run(redis_storage, run_id, reactor="old", status="paused", created_at=created)
    ghosts = {new_id(): 1000.0 + i for i in range(5)}  # expired runs, created after them
    await raw.zadd(index, ghosts)

    await redis_storage.scan_status(["running"], 10)  # the sweeper's calls
    await redis_storage.scan_status(["running"], 10)

    assert {m.decode() for m in await raw.zrange(index, 0, -1)} == set(old_live)


async def test_redis_save_state_from_another_process_moves_the_run_between_indexes(
        redis_storage: RedisStorage, redis_url: str) -> None:
    run_id = await new_run(redis_storage, reactor="moves")
    other = RedisStorage.from_url(redis_url, namespace=redis_storage._keys.ns)  # no facts cached
    try:
        await other.save_state(run_id, OWNER, status="paused", previous_status="running",
                               state=b"s")
    finally:
        await other.aclose()
    paused = await redis_storage.list_runs("moves", "paused", 10, None)
    assert [h.run_id for h in paused.heads] == [run_id]
    assert (await redis_storage.list_runs("moves", "running", 10, None)).heads == []


async def test_redis_a_replayed_write_is_applied_once(redis_storage: RedisStorage) -> None:
    """What redis-py's retry after a lost reply amounts to: the same call sent twice."""
    run_id = await new_run(redis_storage)
    conn = await redis_storage._redis.get()
    keys = redis_storage._keys.run_keys(run_id)
    save: list[Any] = ["token-1", OWNER, "a", b"rec", repr(time.time()), 100, "", "", b"event"]
    assert (await conn.script("save_step", keys, save))[0] == 1
    assert (await conn.script("save_step", keys, save))[0] == 1
    assert await redis_storage.history(run_id) == [b"event"]
    count: list[Any] = ["token-2", "n"]
    assert await conn.script("incr_counter", keys, count) == 1
    assert await conn.script("incr_counter", keys, count) == 1
    claim: list[Any] = ["token-3", "approve", b"p"]
    assert await conn.script("claim", keys, claim) == b"accepted"
    assert await conn.script("claim", keys, claim) == b"accepted"
    taken: list[Any] = ["token-4", "approve", b"p"]
    assert await conn.script("claim", keys, taken) == b"taken"
    lock = redis_storage._keys.lock(run_id)
    assert await conn.script("acquire_lock", [lock], [OWNER, 10_000, "token-5"]) == 1
    assert await conn.script("acquire_lock", [lock], [OWNER, 10_000, "token-5"]) == 1
    assert await redis_storage.release_lock(run_id, OWNER) == 1  # 1 (create) + 1, not + 2


@pytest.mark.parametrize("write", ["save_step", "save_state", "save_unit"])
async def test_redis_a_write_retried_after_another_write_is_applied_once(
        redis_storage: RedisStorage, monkeypatch: pytest.MonkeyPatch, write: str) -> None:
    """A's reply is lost; B (another task's save of the same run) is applied; redis-py then
    resends A with A's token: A must not be applied again (its events appended twice)."""
    run_id = await new_run(redis_storage)
    tokens = iter(["a" * 16, "b" * 16, "a" * 16])
    monkeypatch.setattr("reactorflow.storage.redis.storage._token", lambda: next(tokens))

    async def save(events: list[bytes]) -> None:
        if write == "save_step":
            await redis_storage.save_step(run_id, OWNER, "a", b"rec", events)
        elif write == "save_state":
            await redis_storage.save_state(run_id, OWNER, status="running",
                                           previous_status="running", state=b"s",
                                           events=events)
        else:
            assert await redis_storage.save_unit(run_id, "u", b"rec", events)

    await save([b"A"])
    await save([b"B"])
    await save([b"A"])  # the retry of the first call
    assert await redis_storage.history(run_id) == [b"A", b"B"]


async def test_redis_write_tokens_kept_per_run_are_bounded(redis_storage: RedisStorage,
                                                           raw: redis.asyncio.Redis) -> None:
    """The tokens of the run's last 1024 writes at least, 1536 at most (lib/run_write.lua)."""
    run_id = await new_run(redis_storage)
    for i in range(1600):
        await redis_storage.save_step(run_id, OWNER, f"s{i}", b"r")
    keys = redis_storage._keys.run_keys(run_id)
    fields = [*await raw.hkeys(keys[0]), *await raw.hkeys(keys[6])]  # the run and tok hashes
    kept = [f for f in fields if f.startswith(b"w") and f != b"wn"]
    assert 1024 <= len(kept) <= 1536, len(kept)


async def test_redis_loops_that_end_close_their_connections(
        redis_url: str, raw: redis.asyncio.Redis) -> None:
    backend = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    name_before = len(await raw.client_list())

    def use() -> None:
        anyio.run(backend.load_head, "any")  # no aclose: the loop's shutdown closes it

    for _ in range(5):
        await asyncio.to_thread(use)
    await asyncio.sleep(0.1)
    assert len(await raw.client_list()) <= name_before
    await backend.aclose()


async def test_load_run_can_bring_history_and_claims_in_the_same_read(storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_step(run_id, OWNER, "a", b"rec-a", [b"e1", b"e2"])
    await storage.save_state(run_id, OWNER, status="paused", previous_status="running",
                             state=b"st")
    assert await storage.claim(run_id, "approve", b"payload") is ClaimResult.ACCEPTED
    plain = await storage.load_run(run_id)
    assert plain is not None and plain.history is None and plain.claims is None
    full = await storage.load_run(run_id, history=True, claims=True)
    assert full is not None
    assert full.steps == {"a": b"rec-a"}
    assert full.history == await storage.history(run_id)
    assert full.history is not None and full.history[-2:] == [b"e1", b"e2"]
    assert full.claims == {"approve": b"payload"}


# -- map element slots ---------------------------------------------------------------------


async def test_element_slots_first_win_and_count(storage: Storage) -> None:
    run_id = await new_run(storage)
    first = await storage.save_elements(run_id, "ship", {0: b"a", 2: b"c"})
    assert first is not None and (first.written, first.stored) == (2, 2)
    again = await storage.save_elements(run_id, "ship", {0: b"dup", 1: b"b"})
    assert again is not None and (again.written, again.stored) == (1, 3)
    assert await storage.load_elements(run_id, "ship", 0, 4) == [b"a", b"b", b"c", None]
    assert await storage.count_elements(run_id, "ship") == 3
    assert await storage.count_elements(run_id, "other") == 0
    assert await storage.load_elements(run_id, "other", 0, 2) == [None, None]


async def test_element_slots_replace_rewrites_and_pages_read_in_order(storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "m", {i: f"v{i}".encode() for i in range(1200)})
    replaced = await storage.save_elements(run_id, "m", {5: b"undone"}, replace=True)
    assert replaced is not None and (replaced.written, replaced.stored) == (1, 1200)
    page = await storage.load_elements(run_id, "m", 500, 500)
    assert page[0] == b"v500" and page[-1] == b"v999" and len(page) == 500
    assert (await storage.load_elements(run_id, "m", 5, 1)) == [b"undone"]
    assert await storage.load_elements(run_id, "m", 1199, 5) == [b"v1199", None, None, None,
                                                                 None]
    assert await storage.load_elements(run_id, "m", 0, 0) == []


async def test_element_slots_of_a_missing_run_write_nothing(storage: Storage) -> None:
    assert await storage.save_elements("run-missing", "m", {0: b"x"}) is None
    assert await storage.count_elements("run-missing", "m") == 0


async def test_element_slots_need_no_lock(storage: Storage) -> None:
    run_id = await new_run(storage, owner=OWNER)
    await storage.release_lock(run_id, OWNER)
    written = await storage.save_elements(run_id, "m", {3: b"x"})
    assert written is not None and written.written == 1


async def test_concurrent_element_writes_signal_the_last_one_once(storage: Storage) -> None:
    run_id = await new_run(storage)
    total = 60
    writes = await asyncio.gather(*(storage.save_elements(run_id, "m", {i % total: b"x"})
                                    for i in range(2 * total)))
    assert all(w is not None for w in writes)
    completing = [w for w in writes if w is not None and w.written and w.stored == total]
    assert len(completing) == 1
    assert sum(w.written for w in writes if w is not None) == total


async def test_element_ranges_read_several_slot_ranges_at_once(storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "a", {0: b"a0", 1: b"a1"})
    await storage.save_elements(run_id, "b", {5: b"b5"})
    assert await storage.load_element_ranges(run_id, [("a", 0, 3), ("b", 5, 1), ("c", 0, 0)]
                                             ) == [[b"a0", b"a1", None], [b"b5"], []]


async def test_redis_unreachable_cluster_names_the_url_without_credentials() -> None:
    port = closed_port()
    backend = RedisStorage.from_url(f"redis+cluster://user:s3cr3t-pw@127.0.0.1:{port}/0",
                                    namespace="refused")
    assert "s3cr3t" not in backend.describe()
    with pytest.raises(StorageConnectionError) as caught:
        await backend.load_head("any")
    assert caught.value.url == f"redis+cluster://127.0.0.1:{port}/0"
    assert "s3cr3t" not in str(caught.value) and "s3cr3t" not in repr(caught.value)


@pytest.mark.parametrize(("url", "says"), [
    ("redis+cluster://127.0.0.1:7000/3", "database 0 only"),
    ("unix+cluster:///tmp/redis.sock", "over TCP"),
])
def test_redis_cluster_url_that_cannot_work_is_refused(url: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says) as caught:
        RedisStorage.from_url(url)
    assert caught.value.option == "url"
