"""The gate primitives of the storage contract, on every backend (memory, Redis, and the Redis
Cluster of the cluster lane)."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
import pytest

from reactorflow import clock
from reactorflow.errors import LockLost
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import GateTake, RunCreation
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.testing import FakeClock
from tests.conftest import ALL_BACKENDS, on_every


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    """The storage on each backend in turn, the Redis Cluster included (the cluster lane)."""
    async for backend in on_every(request):
        yield backend


@pytest.fixture
def lapse(storage: Storage) -> Iterator[Callable[[float], Awaitable[None]]]:
    """Let seconds pass on the storage's clock: memory's is a fake clock that jumps; Redis keeps
    its own time (its TIME), so real seconds pass."""
    if not isinstance(storage, MemoryStorage):
        yield anyio.sleep
        return
    fake = FakeClock()
    previous = clock.use(fake)
    try:
        yield fake.advance
    finally:
        clock.use(previous)


def gate() -> str:
    return f"gate:{uuid.uuid4().hex[:10]}"


async def test_a_lock_has_one_holder_and_re_entry_is_held(storage: Storage) -> None:
    key = gate()
    assert await storage.gate_acquire(key, "a", limit=1, ttl=10) is GateTake.ACQUIRED
    assert await storage.gate_acquire(key, "a", limit=1, ttl=10) is GateTake.HELD
    assert await storage.gate_acquire(key, "b", limit=1, ttl=10) is GateTake.BUSY
    assert await storage.gate_holders(key) == ["a"]
    assert await storage.gate_release(key, "a") is True
    assert await storage.gate_release(key, "a") is False  # twice is harmless
    assert await storage.gate_acquire(key, "b", limit=1, ttl=10) is GateTake.ACQUIRED


async def test_a_semaphore_admits_limit_holders(storage: Storage) -> None:
    key = gate()
    takes = [await storage.gate_acquire(key, f"h{i}", limit=3, ttl=10) for i in range(5)]
    assert takes == [GateTake.ACQUIRED] * 3 + [GateTake.BUSY] * 2
    assert sorted(await storage.gate_holders(key)) == ["h0", "h1", "h2"]
    assert await storage.gate_release(key, "h9") is False  # a stranger's release frees nothing
    assert await storage.gate_acquire(key, "h3", limit=3, ttl=10) is GateTake.BUSY
    await storage.gate_release(key, "h1")
    assert await storage.gate_acquire(key, "h3", limit=3, ttl=10) is GateTake.ACQUIRED


async def test_concurrent_acquires_never_exceed_the_limit(storage: Storage) -> None:
    key = gate()
    results: list[GateTake] = []

    async def take(i: int) -> None:
        results.append(await storage.gate_acquire(key, f"h{i}", limit=2, ttl=10))

    async with anyio.create_task_group() as tg:
        for i in range(30):
            tg.start_soon(take, i)
    assert results.count(GateTake.ACQUIRED) == 2
    assert len(await storage.gate_holders(key)) == 2


async def test_a_holder_lapses_after_its_ttl_unless_extended(storage: Storage) -> None:
    key = gate()
    await storage.gate_acquire(key, "a", limit=1, ttl=0.3)
    await storage.gate_acquire(key, "k", limit=2, ttl=0.3)
    assert await storage.gate_extend(key, "k", 30) is True
    with anyio.fail_after(10):
        while await storage.gate_acquire(key, "b", limit=2, ttl=10) is GateTake.BUSY:
            await anyio.sleep(0.05)
    assert sorted(await storage.gate_holders(key)) == ["b", "k"]
    assert await storage.gate_extend(key, "a", 10) is False


async def test_a_release_notifies_the_gate_channel(storage: Storage) -> None:
    key = gate()
    await storage.gate_acquire(key, "a", limit=1, ttl=10)
    async with storage.subscribe_gate(key) as subscription:
        assert await subscription.wait(0.05) is False
        await storage.gate_release(key, "a")
        assert await subscription.wait(10) is True


async def test_rate_windows_are_charged_all_or_nothing(storage: Storage) -> None:
    key = gate()
    windows = [(1, 1000), (3600, 3)]
    for i in range(3):
        assert await storage.rate_charge(key, windows, f"c{i}") is None
    wait = await storage.rate_charge(key, windows, "c3")
    assert wait is not None and 0 < wait <= 3600
    # the refused call charged nothing: a tighter per-second window still has room for it
    assert await storage.rate_charge(key, [(1, 1000)], "c4") is None


async def test_a_charge_is_counted_once(storage: Storage) -> None:
    key = gate()
    assert await storage.rate_charge(key, [(3600, 1)], "run-1") is None
    assert await storage.rate_charge(key, [(3600, 1)], "run-1") is None  # the same run again
    assert await storage.rate_charge(key, [(3600, 1)], "run-2") is not None


async def test_a_charge_asked_for_again_is_remembered_again(
        storage: Storage, lapse: Callable[[float], Awaitable[None]]) -> None:
    """A run charged, then snoozing at a later gate, asks for its charge each time it tries
    its gates: each ask renews the charge's memory (a day), so a run that keeps trying for
    longer than that is still charged once. Memory: its fake clock moves 0.9 days twice;
    Redis: the charge's expiry (its score, server ms) moves on with the ask."""
    key, windows = gate(), [(60, 1)]
    assert await storage.rate_charge(key, windows, "run-1") is None
    if isinstance(storage, MemoryStorage):
        for _ in range(2):
            await lapse(0.9 * 86_400)  # a new minute's window each time: a count would show
            assert await storage.rate_charge(key, windows, "run-1") is None
        assert await storage.rate_charge(key, windows, "run-2") is None  # run-1 not recounted
        return
    assert isinstance(storage, RedisStorage)
    client = (await storage._redis.get()).client
    charges = storage._gate(key, "charges")
    seconds, micros = await client.time()
    asked = int(seconds) * 1000 + int(micros) // 1000  # server ms, after the charge
    await anyio.sleep(0.05)
    assert await storage.rate_charge(key, windows, "run-1") is None
    renewed = await client.zscore(charges, "run-1")
    assert renewed is not None and renewed > asked + 86_400_000  # remembered from this ask on
    assert await storage.rate_charge(key, windows, "run-2") is not None  # counted once


async def test_a_refused_charge_says_when_the_window_frees(storage: Storage) -> None:
    key = gate()
    assert await storage.rate_charge(key, [(60, 1)], "a") is None
    before = time.time()
    wait = await storage.rate_charge(key, [(60, 1)], "b")
    assert wait is not None
    expected = (math.floor(before / 60) + 1) * 60 - before
    assert wait == pytest.approx(expected, abs=1.0)


async def test_period_markers_are_first_wins(storage: Storage) -> None:
    key = gate()
    assert await storage.period_marked(key) is False
    assert await storage.mark_period(key, 10) is True
    assert await storage.mark_period(key, 10) is False
    assert await storage.period_marked(key) is True


async def test_an_ordered_line_gives_turns_in_entry_order(storage: Storage) -> None:
    key = gate()
    numbers = [await storage.ordered_enter(key, t) for t in ("a", "b", "c")]
    assert numbers == [1, 2, 3]
    assert await storage.ordered_enter(key, "b") == 2  # idempotent
    assert await storage.ordered_turn(key, "b", 600) is False
    assert await storage.ordered_turn(key, "a", 600) is True
    assert await storage.ordered_turn(key, "zz", 600) is None
    async with storage.subscribe_gate(key) as subscription:
        assert await storage.ordered_leave(key, "a") is True
        assert await subscription.wait(10) is True
    assert await storage.ordered_turn(key, "b", 600) is True
    assert await storage.ordered_turn(key, "c", 600) is False
    # c finishing early (it was passed over elsewhere) does not let a later ticket jump b
    await storage.ordered_enter(key, "d")
    await storage.ordered_leave(key, "c")
    assert await storage.ordered_turn(key, "d", 600) is False
    await storage.ordered_leave(key, "b")
    assert await storage.ordered_turn(key, "d", 600) is True
    await storage.ordered_leave(key, "d")
    assert await storage.ordered_leave(key, "d") is False
    assert await storage.ordered_enter(key, "e") == 1  # drained: numbering starts again


async def test_a_stale_predecessor_is_passed_over(storage: Storage) -> None:
    key = gate()
    for ticket in ("dead", "also-dead", "alive"):
        await storage.ordered_enter(key, ticket)
    await anyio.sleep(0.3)
    assert await storage.ordered_stamp(key, "alive") is True
    assert await storage.ordered_turn(key, "alive", 0.2) is True  # both passed in one call
    assert await storage.ordered_turn(key, "dead", 30) is False  # passed over: behind "alive"
    await storage.ordered_leave(key, "alive")
    assert await storage.ordered_turn(key, "dead", 30) is True  # not blocked: its turn came
    fresh = gate()
    await storage.ordered_enter(fresh, "slow")
    await storage.ordered_enter(fresh, "next")
    assert await storage.ordered_turn(fresh, "next", 30) is False  # alive within the timeout


async def test_ordered_pass_passes_over_only_a_quiet_turn(storage: Storage) -> None:
    """`ordered_pass` passes over the named ticket only while it has the turn and has been
    quiet for longer than asked (the turn then goes on, the channel is told); a ticket that
    is not the turn, or that asked since, keeps its place."""
    key = gate()
    for ticket in ("ended", "next", "last"):
        await storage.ordered_enter(key, ticket)
    await anyio.sleep(0.3)
    assert await storage.ordered_pass(key, "next", 0.1) is False  # not its turn
    assert await storage.ordered_pass(key, "nobody", 0.1) is False  # not in line
    assert await storage.ordered_pass(key, "ended", 30) is False  # not quiet for that long
    assert await storage.ordered_turn(key, "ended", 600) is True  # it asks: stamped now
    assert await storage.ordered_pass(key, "ended", 0.2) is False  # fresh: kept
    await anyio.sleep(0.3)
    async with storage.subscribe_gate(key) as subscription:
        assert await storage.ordered_pass(key, "ended", 0.2) is True
        assert await subscription.wait(10) is True
    assert (await storage.ordered_peek(key)).turn == "next"
    assert await storage.ordered_turn(key, "next", 600) is True
    assert await storage.ordered_pass(key, "ended", 0.2) is False  # passed over already
    assert await storage.ordered_turn(key, "last", 600) is False  # the order holds behind it


async def test_a_passed_over_ticket_rejoins_at_the_end_of_the_line(
        storage: Storage, lapse: Callable[[float], Awaitable[None]]) -> None:
    """A ticket passed over by the poison pill lost its turn: its stamp is refused, and when it
    asks again (its run started late, after all) it takes a new place at the end, so it never
    has the turn while the ticket whose turn came holds it. Entering anew does the same."""
    key = gate()
    for ticket in ("late", "next", "last"):
        await storage.ordered_enter(key, ticket)
    await lapse(0.3)  # "late" did not start within the timeout
    assert await storage.ordered_stamp(key, "last") is True
    assert await storage.ordered_turn(key, "next", 0.2) is True  # "late" passed over
    assert await storage.ordered_turn(key, "late", 60) is False  # "next" holds it: one holder
    assert await storage.ordered_turn(key, "late", 60) is False
    line = await storage.ordered_peek(key)
    assert (line.turn, line.waiting) == ("next", 2)  # "late" waits again, behind "last"
    assert await storage.ordered_stamp(key, "late") is True  # in line again
    await storage.ordered_leave(key, "next")
    assert await storage.ordered_turn(key, "late", 60) is False
    assert await storage.ordered_turn(key, "last", 60) is True
    await storage.ordered_leave(key, "last")
    assert await storage.ordered_turn(key, "late", 60) is True
    assert await storage.ordered_leave(key, "late") is True
    assert await storage.ordered_enter(key, "again") == 1  # drained: numbering starts again
    other = gate()
    assert [await storage.ordered_enter(other, t) for t in ("a", "b")] == [1, 2]
    await lapse(0.3)
    assert await storage.ordered_turn(other, "b", 0.2) is True
    assert await storage.ordered_stamp(other, "a") is False  # it lost its turn
    assert await storage.ordered_enter(other, "a") == 3  # passed over: a new place, not its own
    assert await storage.ordered_turn(other, "a", 60) is False


async def _running(storage: Storage, events: list[bytes] | None = None) -> str:
    """A new running run owned by "o" (its lock held for 10 s); its id."""
    run_id = f"run-{uuid.uuid4().hex[:10]}"
    assert await storage.create_run(run_id, reactor="flow", status="running", meta=b"m",
                                    state=b"s", created_at=time.time(), owner="o",
                                    lock_ttl=10.0, events=events or [])
    return run_id


async def test_a_final_save_drops_the_gates_it_names(storage: Storage) -> None:
    run_id = await _running(storage)
    key, other = gate(), gate()
    await storage.gate_acquire(key, run_id, limit=1, ttl=10)
    await storage.gate_acquire(other, "someone", limit=1, ttl=10)
    async with storage.subscribe_gate(key) as subscription:
        await storage.save_state(run_id, "o", status="completed", previous_status="running",
                                 state=b"done", release=True,
                                 gates=[(key, run_id), (other, run_id)])
        assert await subscription.wait(10) is True  # waiters are told, as by gate_release
    assert await storage.gate_holders(key) == []
    assert await storage.gate_holders(other) == ["someone"]  # another holder's place is kept
    assert await storage.lock_owner(run_id) is None


async def test_a_final_save_that_drops_gates_writes_its_steps_and_events(
        storage: Storage) -> None:
    """The save that releases gates writes exactly what a save without them writes: its
    state, its step records and its history events, in order."""
    run_id = await _running(storage, events=[b"e0"])
    key, other = gate(), gate()
    for name in (key, other):
        await storage.gate_acquire(name, run_id, limit=1, ttl=10)
    await storage.save_state(run_id, "o", status="completed", previous_status="running",
                             state=b"done", steps={"a": b"ra", "b": b"rb"},
                             events=[b"e1", b"e2", b"e3"], release=True,
                             gates=[(key, run_id), (other, run_id)])
    stored = await storage.load_run(run_id, history=True)
    assert stored is not None and stored.head.status == "completed"
    assert stored.head.state == b"done"
    assert stored.steps == {"a": b"ra", "b": b"rb"}
    assert stored.history == [b"e0", b"e1", b"e2", b"e3"]
    assert await storage.gate_holders(key) == [] and await storage.gate_holders(other) == []


async def test_a_refused_final_save_releases_none_of_its_gates(storage: Storage) -> None:
    """Where the save and its release are one write (in process; one Redis node: the
    `save_release` script), a save refused because its writer does not hold the run's lock
    drops no gate: the holder keeps its places. (A Redis Cluster sends the releases before the
    save: the run's slot and the gate's differ.)"""
    if isinstance(storage, RedisStorage) and (await storage._redis.get()).cluster:
        pytest.skip("a Redis Cluster releases the gates before the save")
    run_id = await _running(storage)
    key = gate()
    await storage.gate_acquire(key, run_id, limit=1, ttl=10)
    with pytest.raises(LockLost):
        await storage.save_state(run_id, "not-the-owner", status="completed",
                                 previous_status="running", state=b"done", release=True,
                                 gates=[(key, run_id)])
    assert await storage.gate_holders(key) == [run_id]
    stored = await storage.load_run(run_id)
    assert stored is not None and stored.head.status == "running"


async def test_a_release_hands_the_place_to_the_first_queued_holder(storage: Storage) -> None:
    """Queued holders are served first come, first served: the release makes the first one a
    holder and names it on the channel (it starts without another round trip)."""
    key = gate()
    await storage.gate_acquire(key, "a", limit=1, ttl=10)
    assert await storage.gate_acquire(key, "w1", limit=1, ttl=10, queue_for=30) is GateTake.BUSY
    assert await storage.gate_acquire(key, "w2", limit=1, ttl=10, queue_for=30) is GateTake.BUSY
    assert await storage.gate_acquire(key, "w1", limit=1, ttl=10, queue_for=30) is GateTake.BUSY
    assert await storage.gate_acquire(key, "x", limit=1, ttl=10) is GateTake.BUSY  # not queued
    async with storage.subscribe_gate(key) as subscription:
        assert await storage.gate_release(key, "a") is True
        assert await subscription.wait(10) is True
        assert subscription.message == b"w1"  # asking again kept w1's place in the queue
    assert await storage.gate_holders(key) == ["w1"]
    assert await storage.gate_acquire(key, "w1", limit=1, ttl=10) is GateTake.HELD
    assert await storage.gate_acquire(key, "x", limit=1, ttl=10) is GateTake.BUSY
    async with storage.subscribe_gate(key) as subscription:
        assert await storage.gate_release(key, "w1") is True
        assert await subscription.wait(10) is True and subscription.message == b"w2"
    assert await storage.gate_holders(key) == ["w2"]
    await storage.gate_release(key, "w2")
    assert await storage.gate_holders(key) == []  # nobody queued: the place is free


async def test_a_semaphore_hands_over_only_what_fits(storage: Storage) -> None:
    key = gate()
    for holder in ("a", "b"):
        await storage.gate_acquire(key, holder, limit=2, ttl=10)
    for waiter in ("w1", "w2", "w3"):
        await storage.gate_acquire(key, waiter, limit=2, ttl=10, queue_for=30)
    await storage.gate_release(key, "a")
    assert sorted(await storage.gate_holders(key)) == ["b", "w1"]
    await storage.gate_release(key, "b")
    await storage.gate_release(key, "w1")
    assert sorted(await storage.gate_holders(key)) == ["w2", "w3"]


async def test_an_expired_or_withdrawn_waiter_is_passed_over(storage: Storage) -> None:
    key = gate()
    await storage.gate_acquire(key, "a", limit=1, ttl=10)
    await storage.gate_acquire(key, "late", limit=1, ttl=10, queue_for=0.05)
    await storage.gate_acquire(key, "gone", limit=1, ttl=10, queue_for=30)
    await storage.gate_acquire(key, "next", limit=1, ttl=10, queue_for=30)
    assert await storage.gate_withdraw(key, "gone") is GateTake.BUSY  # it did not hold the gate
    await anyio.sleep(0.2)  # "late" stops waiting (its queue time is up)
    await storage.gate_release(key, "a")
    assert await storage.gate_holders(key) == ["next"]
    assert await storage.gate_withdraw(key, "next") is GateTake.HELD  # handed the place: held
    assert await storage.gate_holders(key) == ["next"]


async def test_a_final_save_hands_the_place_over(storage: Storage) -> None:
    run_id = await _running(storage)
    key = gate()
    await storage.gate_acquire(key, run_id, limit=1, ttl=10)
    await storage.gate_acquire(key, "waiter", limit=1, ttl=10, queue_for=30)
    async with storage.subscribe_gate(key) as subscription:
        await storage.save_state(run_id, "o", status="completed", previous_status="running",
                                 state=b"done", release=True, gates=[(key, run_id)])
        assert await subscription.wait(10) is True and subscription.message == b"waiter"
    assert await storage.gate_holders(key) == ["waiter"]


async def test_an_ordered_line_can_be_peeked_skipped_and_reset(storage: Storage) -> None:
    key = gate()
    empty = await storage.ordered_peek(key)
    assert (empty.key, empty.turn, empty.turn_stamp, empty.waiting) == (key, None, None, 0)
    for ticket in ("a", "b", "c"):
        await storage.ordered_enter(key, ticket)
    line = await storage.ordered_peek(key)
    assert (line.turn, line.waiting) == ("a", 2)
    assert line.turn_stamp is not None and abs(line.turn_stamp - time.time()) < 60
    assert await storage.ordered_turn(key, "b", 600) is False
    async with storage.subscribe_gate(key) as subscription:
        assert await storage.ordered_skip(key, "a") is True  # stuck: passed over by hand
        assert await subscription.wait(10) is True
    assert await storage.ordered_skip(key, "a") is False  # not in line any more
    assert (await storage.ordered_peek(key)).turn == "b"
    assert await storage.ordered_turn(key, "b", 600) is True
    await storage.ordered_leave(key, "b")
    after = await storage.ordered_peek(key)
    assert (after.turn, after.waiting) == ("c", 0)
    async with storage.subscribe_gate(key) as subscription:
        assert await storage.ordered_reset(key) == 1
        assert await subscription.wait(10) is True
    assert (await storage.ordered_peek(key)).turn is None
    assert await storage.ordered_turn(key, "c", 600) is None  # it asks again: enters anew
    assert await storage.ordered_enter(key, "c") == 1
    assert await storage.ordered_reset(gate()) == 0  # no line: nothing to reset


def creation(owner: str = "o") -> RunCreation:
    run_id = f"run-{uuid.uuid4().hex[:10]}"
    return RunCreation(run_id, "flow", "running", b"meta", b"state", time.time(), owner, 10.0,
                       [b"started"])


async def creates_runs(storage: Storage) -> bool:
    """Whether this backend creates a queued run with the hand-over (all but a cluster)."""
    if not isinstance(storage, RedisStorage):
        return True
    return not (await storage._redis.get()).cluster


async def test_a_release_creates_the_run_queued_with_the_waiter(storage: Storage) -> None:
    """The run a waiter queued with is created by the release that hands it the place, in the
    same atomic step (its lock taken for its owner, listed), and the notification says so;
    on a Redis Cluster only the place is handed over."""
    key, run = gate(), creation()
    await storage.gate_acquire(key, "a", limit=1, ttl=10)
    assert await storage.gate_acquire(key, run.run_id, limit=1, ttl=10, queue_for=30,
                                      creates=run) is GateTake.BUSY
    assert await storage.load_head(run.run_id) is None  # nothing stored while it waits
    async with storage.subscribe_gate(key) as subscription:
        assert await storage.gate_release(key, "a") is True
        assert await subscription.wait(10) is True
        message = subscription.message
    assert await storage.gate_holders(key) == [run.run_id]
    if not await creates_runs(storage):
        assert message == run.run_id.encode()
        assert await storage.load_head(run.run_id) is None
        assert await storage.gate_acquire(key, run.run_id, limit=1, ttl=10) is GateTake.HELD
        return
    assert message == run.run_id.encode() + b"\0+"
    stored = await storage.load_run(run.run_id, history=True)
    assert stored is not None and stored.history == [b"started"]
    assert (stored.head.reactor, stored.head.status, stored.head.meta, stored.head.state) == (
        "flow", "running", b"meta", b"state")
    assert await storage.lock_owner(run.run_id) == "o"
    listed = await storage.list_runs("flow", "running", 1000, None)
    assert run.run_id in [head.run_id for head in listed.heads]
    # told once (a waiter whose notification was lost asks again), then a plain holder
    assert await storage.gate_acquire(key, run.run_id, limit=1, ttl=10) is GateTake.CREATED
    assert await storage.gate_acquire(key, run.run_id, limit=1, ttl=10) is GateTake.HELD


async def test_a_withdrawn_or_expired_waiter_s_run_is_never_created(storage: Storage) -> None:
    key, gone, late, served = gate(), creation(), creation(), creation()
    await storage.gate_acquire(key, "a", limit=1, ttl=10)
    await storage.gate_acquire(key, late.run_id, limit=1, ttl=10, queue_for=0.05, creates=late)
    await storage.gate_acquire(key, gone.run_id, limit=1, ttl=10, queue_for=30, creates=gone)
    await storage.gate_acquire(key, served.run_id, limit=1, ttl=10, queue_for=30,
                               creates=served)
    assert await storage.gate_withdraw(key, gone.run_id) is GateTake.BUSY
    await anyio.sleep(0.2)  # "late" stops waiting: a stale entry (e.g. its caller crashed)
    await storage.gate_release(key, "a")
    assert await storage.gate_holders(key) == [served.run_id]
    assert await storage.load_head(gone.run_id) is None
    assert await storage.load_head(late.run_id) is None
    expected = GateTake.CREATED if await creates_runs(storage) else GateTake.HELD
    assert await storage.gate_withdraw(key, served.run_id) is expected  # handed over meanwhile
    assert (await storage.load_head(served.run_id) is not None) == (
        expected is GateTake.CREATED)


async def test_a_waiter_that_takes_a_free_place_creates_its_run_itself(storage: Storage,
                                                                         ) -> None:
    """A queued waiter that finds the place free (ACQUIRED) leaves the queue with its run:
    a later release never creates it."""
    key, run = gate(), creation()
    await storage.gate_acquire(key, "a", limit=1, ttl=10)
    await storage.gate_acquire(key, run.run_id, limit=1, ttl=10, queue_for=30, creates=run)
    await storage.gate_extend(key, "a", 0.05)
    await anyio.sleep(0.2)  # "a" lapses: nobody releases, the place is free
    assert await storage.gate_acquire(key, run.run_id, limit=1, ttl=10, queue_for=30,
                                      creates=run) is GateTake.ACQUIRED
    await storage.gate_release(key, run.run_id)
    assert await storage.load_head(run.run_id) is None


async def test_a_hand_over_keeps_create_run_s_refusals(storage: Storage) -> None:
    """A run whose id exists already is not created by the hand-over: the place is handed
    over all the same, and the notification names the holder only."""
    key, run = gate(), creation()
    assert await storage.create_run(run.run_id, reactor="flow", status="running", meta=b"x",
                                    state=b"x", created_at=time.time(), owner="other",
                                    lock_ttl=10.0)
    await storage.gate_acquire(key, "a", limit=1, ttl=10)
    await storage.gate_acquire(key, run.run_id, limit=1, ttl=10, queue_for=30, creates=run)
    async with storage.subscribe_gate(key) as subscription:
        await storage.gate_release(key, "a")
        assert await subscription.wait(10) is True
        assert subscription.message == run.run_id.encode()
    assert await storage.gate_holders(key) == [run.run_id]
    head = await storage.load_head(run.run_id)
    assert head is not None and head.meta == b"x"
    assert await storage.gate_withdraw(key, run.run_id) is GateTake.HELD


async def test_an_ordered_peek_tells_how_many_places_are_before_a_ticket(storage: Storage) -> None:
    key = gate()
    for ticket in ("a", "b", "c", "d"):
        await storage.ordered_enter(key, ticket)
    await storage.ordered_leave(key, "b")  # finished out of turn: no longer ahead of anyone
    assert [(await storage.ordered_peek(key, t)).ahead for t in ("a", "c", "d")] == [0, 1, 2]
    line = await storage.ordered_peek(key, "d")
    assert (line.turn, line.waiting, line.ahead) == ("a", 2, 2)
    assert (await storage.ordered_peek(key, "nobody")).ahead is None
    assert (await storage.ordered_peek(key)).ahead is None  # no ticket asked about
    assert await storage.ordered_skip(key, "a") is True  # passed over: out of the line
    assert (await storage.ordered_peek(key, "a")).ahead is None
    assert (await storage.ordered_peek(key, "d")).ahead == 1
