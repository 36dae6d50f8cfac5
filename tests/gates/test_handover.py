"""A caller waiting for its reactor's gate queues with the run it is about to create: the
release that hands it the place creates that run in the same atomic step (one node, memory),
so the caller goes straight to its first step. On a Redis Cluster (the cluster lane) only the
place is handed over and the caller creates its run itself: the same outcomes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import clock
from reactorflow.definition.graph import plan_for
from reactorflow.runtime.ops.creation import new_run
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import GateTake
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import unique


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    """Each backend in turn, the Redis Cluster included (the cluster lane)."""
    async for backend in on_every(request):
        yield backend


class Account(msgspec.Struct):
    account_id: str


async def folds(storage: Storage) -> bool:
    """Whether a release creates the run queued with its waiter here (not on a cluster)."""
    if not isinstance(storage, RedisStorage):
        return True
    return not (await storage._redis.get()).cluster


async def queued(storage: Storage, key: str) -> int:
    """How many holders wait in gate `key`'s queue."""
    if isinstance(storage, RedisStorage):
        conn = await storage._redis.get()
        return int(await conn.client.zcard(storage._gate(key, "queue")))
    return len(storage._queues.get(key, {}))  # type: ignore[attr-defined]


async def queued_runs(storage: Storage, key: str) -> int:
    """How many runs (or created marks) are kept beside gate `key`'s queue."""
    if isinstance(storage, RedisStorage):
        conn = await storage._redis.get()
        return int(await conn.client.hlen(storage._gate(key, "runs")))
    return sum(1 for k, _ in storage._creations if k == key)  # type: ignore[attr-defined]


async def until_queued(storage: Storage, key: str, count: int = 1) -> None:
    with anyio.fail_after(30):
        while await queued(storage, key) < count:
            await anyio.sleep(0.005)


def creations(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run ids `storage.create_run` is called for from now on."""
    calls: list[str] = []
    original = storage.create_run

    async def counted(run_id: str, **kwargs: Any) -> bool:
        calls.append(run_id)
        return await original(run_id, **kwargs)

    monkeypatch.setattr(storage, "create_run", counted)
    return calls


def locked(wait: float, step: Callable[[str], Any] | None = None) -> rf.Reactor:
    flow = rf.Reactor(unique("handover"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}", wait=wait)])

    @flow.step
    async def work(account_id: str) -> str:
        if step is not None:
            await step(account_id)
        return account_id

    return flow


async def held_then_waited(storage: Storage, flow_of: Callable[..., rf.Reactor],
                           start: Callable[[rf.Reactor, str], Any],
                           before_waiter: Callable[[], Any] = lambda: None) -> None:
    """`start(flow, "first")` holds the lock until `start(flow, "second")` is queued for it
    (`before_waiter` runs in between); both run to their end."""
    entered, leave = anyio.Event(), anyio.Event()

    async def hold(account_id: str) -> None:
        if not entered.is_set():
            entered.set()
            await leave.wait()

    flow = flow_of(60, hold)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start, flow, "first")
            await entered.wait()
            before_waiter()
            tg.start_soon(start, flow, "second")
            await until_queued(storage, "acct:A1")
            leave.set()


async def test_the_release_creates_the_waiting_caller_s_run(
        storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[list[str]] = []
    runs: dict[str, rf.Run] = {}  # by the caller's part (their callers may return in any order)
    flows: list[rf.Reactor] = []

    async def start(flow: rf.Reactor, part: str) -> None:
        flows.append(flow)
        runs[part] = await flow.run(account_id="A1")

    await held_then_waited(storage, locked, start,
                           lambda: counted.append(creations(storage, monkeypatch)))
    created = counted[0]  # create_run's calls once the first run holds the lock
    flow = flows[0]
    holder, waiter = runs["first"], runs["second"]
    assert (holder.status, waiter.status) == (rf.Status.COMPLETED, rf.Status.COMPLETED)
    assert waiter.value == "A1" and waiter.history[0].kind == "run.started"
    # the waiter's run was stored by the release that handed it the lock
    assert created == ([] if await folds(storage) else [waiter.id])
    assert len((await flow.list_runs(limit=10)).runs) == 2
    assert await storage.gate_holders("acct:A1") == []
    assert await queued_runs(storage, "acct:A1") == 0  # nothing left beside the queue


async def test_a_waiter_whose_time_is_up_gets_gate_busy_and_nothing_is_stored(
        storage: Storage) -> None:
    flow = locked(0.2)
    other = f"h-{uuid.uuid4().hex[:8]}"
    assert await storage.gate_acquire("acct:A1", other, limit=1, ttl=60) is GateTake.ACQUIRED
    with anyio.fail_after(30), pytest.raises(rf.GateBusy):
        await flow.run(account_id="A1", idempotency_key="once")
    assert (await flow.list_runs(limit=10)).runs == []  # no run, no listing entry
    assert await queued(storage, "acct:A1") == 0
    assert await queued_runs(storage, "acct:A1") == 0
    await storage.gate_release("acct:A1", other)
    again = await flow.run(account_id="A1", idempotency_key="once")  # the claim was given back
    assert again.status is rf.Status.COMPLETED and not again.replayed


async def test_a_place_handed_over_as_the_wait_ends_keeps_its_run(
        storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """The release lands in the waiter's last moment and its notification is not seen before
    the time is up: the withdrawal finds the waiter holding the place (and, where the release
    creates it, its run), and its run goes on."""
    flow = locked(0.3)
    created = creations(storage, monkeypatch)
    other = f"h-{uuid.uuid4().hex[:8]}"
    await storage.gate_acquire("acct:A1", other, limit=1, ttl=60)

    async def released_unseen(wait: Any, seconds: float, *, why: str = "") -> bool:
        await storage.gate_release("acct:A1", other)  # hands the place to the queued waiter
        await anyio.sleep(seconds + 0.05)  # ...whose time runs out before it looks
        return False

    monkeypatch.setattr(clock, "wait_signal", released_unseen)
    with anyio.fail_after(30):
        run = await flow.run(account_id="A1")
    assert run.status is rf.Status.COMPLETED
    assert created == ([] if await folds(storage) else [run.id])
    assert await storage.gate_holders("acct:A1") == []


async def test_a_cancelled_waiter_handed_the_place_ends_its_run_aborted(
        storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled as the release hands it the place: the place is given back; a run the
    release stored ends `aborted` (as a cancelled caller's run does), its step never ran."""
    ran: list[str] = []

    async def body(account_id: str) -> None:
        ran.append(account_id)

    flow = locked(60, body)
    other = f"h-{uuid.uuid4().hex[:8]}"
    await storage.gate_acquire("acct:A1", other, limit=1, ttl=60)
    withdraw = storage.gate_withdraw

    async def released_first(key: str, holder: str) -> GateTake:
        await storage.gate_release(key, other)
        return await withdraw(key, holder)

    monkeypatch.setattr(storage, "gate_withdraw", released_first)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: flow.run(account_id="A1"))
            await until_queued(storage, "acct:A1")
            tg.cancel_scope.cancel()
    runs = (await flow.list_runs(limit=10)).runs
    if await folds(storage):
        assert [r.status for r in runs] == [rf.Status.ABORTED]
        run = await flow.get(runs[0].id)
        assert [e.kind for e in run.history] == ["run.started", "run.aborted"]
        assert await storage.lock_owner(run.id) is None
    else:
        assert runs == []  # the caller creates its run after the hand-over: never created
    assert ran == []
    assert await storage.gate_holders("acct:A1") == []


async def test_a_stale_entry_of_a_crashed_waiter_is_skipped(storage: Storage) -> None:
    """A waiter that died while queued: its entry ends with its wait, and the release serves
    the next waiter; the dead one's run is never created."""
    flow = locked(60)
    other = f"h-{uuid.uuid4().hex[:8]}"
    await storage.gate_acquire("acct:A1", other, limit=1, ttl=60)
    dead = await new_run(storage, flow, plan_for(flow), f"dead-{uuid.uuid4().hex[:8]}",
                         Account("A1"), "gone-owner")
    await storage.gate_acquire("acct:A1", dead.creation.run_id, limit=1, ttl=60,
                               queue_for=0.05, creates=dead.creation)
    runs: list[rf.Run] = []

    async def start() -> None:
        runs.append(await flow.run(account_id="A1"))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await until_queued(storage, "acct:A1", 2)
            await anyio.sleep(0.1)  # the dead waiter's queue time runs out (a stored deadline)
            await storage.gate_release("acct:A1", other)
    assert runs[0].status is rf.Status.COMPLETED
    assert await storage.load_head(dead.creation.run_id) is None
    assert [r.id for r in (await flow.list_runs(limit=10)).runs] == [runs[0].id]


async def test_a_waiter_that_died_after_its_hand_over_is_recovered(storage: Storage) -> None:
    """Handed the place (and its run) just before it died: the run is stored with its
    caller's liveness lock, which lapses; the sweeper recovers it like any run whose caller
    died after creating it, and it completes."""
    rf.configure(lock_ttl=0.3, stall_timeout=0.01)
    flow = locked(60)
    other = f"h-{uuid.uuid4().hex[:8]}"
    await storage.gate_acquire("acct:A1", other, limit=1, ttl=60)
    dead = await new_run(storage, flow, plan_for(flow), f"dead-{uuid.uuid4().hex[:8]}",
                         Account("A1"), "gone-owner")
    await storage.gate_acquire("acct:A1", dead.creation.run_id, limit=1, ttl=60,
                               queue_for=60, creates=dead.creation)
    await storage.gate_release("acct:A1", other)
    run_id = dead.creation.run_id
    if not await folds(storage):
        assert await storage.load_head(run_id) is None  # only the place was handed over
        return
    with anyio.fail_after(30):
        while await storage.lock_owner(run_id) is not None:  # the dead caller's lock lapses
            await anyio.sleep(0.02)
        report = await rf.sweep_once()
    assert run_id in report.recovered
    run = await flow.get(run_id)
    assert run.status is rf.Status.COMPLETED and run.value == "A1"
    assert await storage.gate_holders("acct:A1") == []


async def test_idempotency_keyed_waiters_are_created_by_the_hand_over(
        storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[list[str]] = []
    runs: dict[str, rf.Run] = {}  # by idempotency key (their callers may return in any order)
    flows: list[rf.Reactor] = []

    async def start(flow: rf.Reactor, key: str) -> None:
        flows.append(flow)
        runs[key] = await flow.run(account_id="A1", idempotency_key=key)

    await held_then_waited(storage, locked, start,
                           lambda: counted.append(creations(storage, monkeypatch)))
    created = counted[0]  # create_run's calls once the first run holds the lock
    assert [runs[key].status for key in ("first", "second")] == [rf.Status.COMPLETED] * 2
    assert created == ([] if await folds(storage) else [runs["second"].id])
    replay = await flows[0].run(account_id="A1", idempotency_key="second")
    assert replay.replayed and replay.id == runs["second"].id
