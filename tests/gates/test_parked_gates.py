"""A run parked at an async unit or a fanned-out map is still running: it keeps its reactor
gates (a lock, a semaphore; a gated map's own places) until its final state, completed or
failed through its rollback. Another run for the same key is refused in its caller (`wait=0`)
and snoozes in a worker meanwhile; the resumed run takes its places again as their holder; a
crashed parked holder's places lapse their park's bound plus their TTL later.

Jobs are delivered by the test itself (a queue that keeps them), so "parked, nobody holds the
run" is a state the test stands in, not a race it hopes to catch."""

from __future__ import annotations

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import clock
from reactorflow.runtime.engine.async_units import child_run_id
from reactorflow.runtime.engine.job_queue import JobKind
from reactorflow.runtime.services import job_handling as jobs
from reactorflow.testing.clock import FakeClock
from tests.helpers import Captured, kinds, unique


class Account(msgspec.Struct):
    account_id: str


async def _deliver(captured: Captured, run_id: str, *only: JobKind, once: bool = False) -> None:
    """Run the kept jobs of `run_id` (of the kinds `only`, if given) and, unless `once`, the
    jobs they enqueue, until none is left."""
    while batch := [j for j in captured.jobs if j.run_id == run_id
                    and (not only or j.kind in only)]:
        for job in batch:
            captured.jobs.remove(job)
            await jobs.execute(job)
        if once:
            return


def _gated(key: str) -> list[rf.Lock | rf.Semaphore]:
    return [rf.Lock(f"{key}:{{account_id}}"), rf.Semaphore(f"{key}s:{{account_id}}", limit=1)]


def _others(key: str) -> tuple[rf.Reactor, rf.Reactor]:
    """A reactor with the same lock (wait=0: refused in its caller), and one taking it as a
    step gate (dispatched: it waits in a worker)."""
    other = rf.Reactor(unique("parked.other"), inputs=Account,
                       gates=[rf.Lock(f"{key}:{{account_id}}")])

    @other.step
    async def work(account_id: str) -> str:
        return account_id

    waiter = rf.Reactor(unique("parked.waiter"), inputs=Account)

    @waiter.step(gates=[rf.Lock(f"{key}:{{account_id}}")])
    async def wait_work(account_id: str) -> str:
        return account_id

    return other, waiter


def _unit_flow(storage: rf.Storage, key: str, seen: list[list[str]], *,
               fail: bool) -> rf.Reactor:
    flow = rf.Reactor(unique("parked.unit"), inputs=Account, gates=_gated(key))

    @flow.step
    async def prepare(account_id: str) -> str:
        return account_id

    @prepare.undo
    async def unprepare(result: str, account_id: str) -> None:  # in the rollback: still held
        seen.append(await storage.gate_holders(f"{key}:{account_id}"))

    @flow.async_step(after=["prepare"])
    async def notify(account_id: str) -> str:
        return account_id

    @flow.step
    async def after(notify: str) -> str:
        if fail:
            raise RuntimeError("after failed")
        return notify

    return flow


async def _assert_held_by(storage: rf.Storage, key: str, run_id: str,
                          other: rf.Reactor, waiter: rf.Reactor,
                          captured: Captured) -> str:
    """The parked run holds the gates; the other run is refused in its caller and snoozes in
    a worker. Returns the waiting run's id."""
    assert await storage.gate_holders(f"{key}:A1") == [run_id]
    assert await storage.gate_holders(f"{key}s:A1") == [f"{run_id}|"]
    with pytest.raises(rf.GateBusy) as busy:
        await other.run(account_id="A1")
    assert (busy.value.gate, busy.value.key) == ("lock", f"{key}:A1")
    waiting = await waiter.dispatch(account_id="A1")
    await _deliver(captured, waiting.id, once=True)  # the lock is busy: the worker snoozes
    snoozed = await waiter.get(waiting.id)
    assert snoozed.status is rf.Status.RUNNING and kinds(snoozed, "run.snoozed")
    assert snoozed.steps["wait_work"].gate == f"lock '{key}:A1'"
    return waiting.id


async def _assert_free(storage: rf.Storage, key: str, other: rf.Reactor, waiter: rf.Reactor,
                       waiting: str, captured: Captured) -> None:
    assert await storage.gate_holders(f"{key}:A1") == []
    assert await storage.gate_holders(f"{key}s:A1") == []
    assert (await other.run(account_id="A1")).status is rf.Status.COMPLETED
    await _deliver(captured, waiting)  # the snooze's job: the lock is free now
    assert (await waiter.get(waiting)).status is rf.Status.COMPLETED


@pytest.mark.parametrize("fail", [False, True], ids=["completed", "failed"])
async def test_a_run_parked_at_an_async_unit_keeps_its_gates_until_its_final_state(
        storage: rf.Storage, captured: Captured, fail: bool) -> None:
    key = unique("pu")
    seen: list[list[str]] = []
    flow = _unit_flow(storage, key, seen, fail=fail)
    other, waiter = _others(key)
    run = await flow.dispatch(account_id="A1")
    await _deliver(captured, run.id, JobKind.RUN, once=True)  # notify dispatched; `after` parks
    parked = await flow.get(run.id)
    assert parked.status is rf.Status.RUNNING and kinds(parked, "run.parked")
    waiting = await _assert_held_by(storage, key, run.id, other, waiter, captured)

    await _deliver(captured, run.id)  # the unit, then the run it wakes: to the final state
    done = await flow.get(run.id)
    assert done.status is (rf.Status.FAILED if fail else rf.Status.COMPLETED)
    assert seen == ([[run.id]] if fail else [])  # its rollback ran under its lock
    await _assert_free(storage, key, other, waiter, waiting, captured)


async def test_a_run_parked_at_a_fanned_out_map_keeps_its_gates_until_its_final_state(
        storage: rf.Storage, captured: Captured) -> None:
    key = unique("pm")
    flow = rf.Reactor(unique("parked.map"), inputs=Account, gates=_gated(key))

    @flow.step
    async def letters(account_id: str) -> list[str]:
        return ["x", "y", "z"]

    @flow.map_step(over="letters", fan_out=True, batch_size=2,
                   gates=[rf.Semaphore(f"{key}m:{{account_id}}", limit=1)])
    async def each(letter: str, account_id: str) -> str:
        return letter

    other, waiter = _others(key)
    run = await flow.dispatch(account_id="A1")
    await _deliver(captured, run.id, JobKind.RUN, once=True)  # fans out: parks at the map
    parked = await flow.get(run.id)
    assert parked.status is rf.Status.RUNNING and kinds(parked, "run.parked")
    assert await storage.gate_holders(f"{key}m:A1") == [f"{run.id}|each"]  # the map's own
    waiting = await _assert_held_by(storage, key, run.id, other, waiter, captured)

    await _deliver(captured, run.id, JobKind.ELEMENT)  # every element: the last wakes the run
    assert await storage.gate_holders(f"{key}:A1") == [run.id]  # settled, not yet collected
    await _deliver(captured, run.id)
    done = await flow.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.value == ["x", "y", "z"]
    assert await storage.gate_holders(f"{key}m:A1") == []
    await _assert_free(storage, key, other, waiter, waiting, captured)


async def test_a_cancelled_parked_run_gives_its_gates_back(
        storage: rf.Storage, captured: Captured) -> None:
    key = unique("pc")
    flow = _unit_flow(storage, key, [], fail=False)
    run = await flow.dispatch(account_id="A1")
    await _deliver(captured, run.id, JobKind.RUN, once=True)
    assert await storage.gate_holders(f"{key}:A1") == [run.id]
    cancelled = await flow.cancel(run.id, reason="enough")
    assert cancelled.status is rf.Status.CANCELLED
    assert await storage.gate_holders(f"{key}:A1") == []
    assert await storage.gate_holders(f"{key}s:A1") == []


async def test_a_crashed_parked_holders_gates_lapse_after_the_park_and_their_ttl(
        storage: rf.Storage, captured: Captured) -> None:
    """Nobody takes the parked run on (its jobs are lost with the crash): its places lapse
    `async_wait_timeout` (the park's bound) plus their `ttl` after it parked. On memory the
    fake clock shows both sides of that moment; Redis keeps time itself (its TIME), so there
    the test waits, briefly, for the lapse."""
    memory = isinstance(storage, rf.MemoryStorage)
    fake = FakeClock() if memory else None
    ttl, bound = (10.0, 100.0) if memory else (1.0, 1.0)
    rf.configure(async_wait_timeout=bound)
    key = unique("pl")
    flow = rf.Reactor(unique("parked.crash"), inputs=Account,
                      gates=[rf.Lock(f"{key}:{{account_id}}", ttl=ttl)])

    @flow.async_step
    async def notify(account_id: str) -> str:
        return account_id

    @flow.step
    async def after(notify: str) -> str:
        return notify

    other = rf.Reactor(unique("parked.next"), inputs=Account,
                       gates=[rf.Lock(f"{key}:{{account_id}}", ttl=ttl)])

    @other.step
    async def work(account_id: str) -> str:
        return account_id

    previous = clock.use(fake) if fake is not None else None
    try:
        run = await flow.dispatch(account_id="A1")
        await _deliver(captured, run.id, JobKind.RUN, once=True)  # parks; its jobs are lost
        captured.jobs.clear()
        assert await storage.gate_holders(f"{key}:A1") == [run.id]
        if fake is not None:
            await fake.advance(bound + ttl - 1)  # past its own TTL, within the park's bound
            with pytest.raises(rf.GateBusy):
                await other.run(account_id="A1")
            await fake.advance(2)
            assert (await other.run(account_id="A1")).status is rf.Status.COMPLETED
        else:
            with anyio.fail_after(30):
                while True:
                    try:
                        assert (await other.run(account_id="A1")).status is rf.Status.COMPLETED
                        break
                    except rf.GateBusy:
                        await anyio.sleep(0.05)
    finally:
        if fake is not None:
            clock.use(previous)


async def test_a_run_handed_to_a_worker_keeps_its_gates_for_it(
        storage: rf.Storage, captured: Captured) -> None:
    """`background`: the caller's run is handed to a worker with its gates kept (nobody can
    take them in between); the worker takes them on as their holder and gives them back at
    the run's final state."""
    key = unique("ph")
    flow = rf.Reactor(unique("parked.handoff"), inputs=Account, gates=_gated(key))

    @flow.step
    async def first(account_id: str) -> str:
        return account_id

    @flow.step
    async def second(first: str) -> str:
        return first

    flow.background(after="first")
    other, waiter = _others(key)
    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.RUNNING and kinds(run, "run.handed_off")
    waiting = await _assert_held_by(storage, key, run.id, other, waiter, captured)
    await _deliver(captured, run.id)  # the worker finishes it
    assert (await flow.get(run.id)).status is rf.Status.COMPLETED
    await _assert_free(storage, key, other, waiter, waiting, captured)


async def test_fanned_out_element_reactors_re_enter_their_parked_runs_lock(
        storage: rf.Storage, captured: Captured) -> None:
    """A fanned-out element's reactor (and its steps) taking the lock its parked run keeps
    re-enter it, as an inline element does: they run, and leave it held by the run."""
    key = unique("pe")
    seen: list[list[str]] = []
    child = rf.Reactor(unique("parked.child"), inputs=Account,
                       gates=[rf.Lock(f"{key}:{{account_id}}", wait=0)])

    @child.step(gates=[rf.Lock(f"{key}:{{account_id}}", wait=0)])
    async def inner(account_id: str) -> str:
        seen.append(await storage.gate_holders(f"{key}:{account_id}"))
        return account_id

    flow = rf.Reactor(unique("parked.elements"), inputs=Account,
                      gates=[rf.Lock(f"{key}:{{account_id}}")])

    @flow.step
    async def letters(account_id: str) -> list[str]:
        return ["x", "y"]

    @flow.map_step(over="letters", fan_out=True, reactor=child)
    async def each(letter: str, account_id: str) -> Account:
        return Account(account_id)

    run = await flow.dispatch(account_id="A1")
    await _deliver(captured, run.id, JobKind.RUN, once=True)  # fans out: parks at the map
    await _deliver(captured, run.id, JobKind.ELEMENT)
    assert seen == [[run.id], [run.id]]
    assert await storage.gate_holders(f"{key}:A1") == [run.id]  # still the run's
    await _deliver(captured, run.id)
    done = await flow.get(run.id)
    assert done.status is rf.Status.COMPLETED, done.error
    assert await storage.gate_holders(f"{key}:A1") == []


async def test_an_async_reactor_steps_gates_are_kept_while_its_child_run_is_parked(
        storage: rf.Storage, captured: Captured) -> None:
    """An async_reactor step's own gates are the child run's: kept while the child is parked
    at an async unit of its own, given back at its final state."""
    key = unique("pa")
    child = rf.Reactor(unique("parked.arc"), inputs=Account)

    @child.async_step
    async def notify(account_id: str) -> str:
        return account_id

    @child.step
    async def after(notify: str) -> str:
        return notify

    flow = rf.Reactor(unique("parked.arp"), inputs=Account)

    @flow.async_reactor(child, gates=[rf.Lock(f"{key}:{{account_id}}")])
    async def handle(account_id: str) -> Account:
        return Account(account_id)

    @flow.step
    async def done(handle: str) -> str:
        return handle

    other, _ = _others(key)
    run = await flow.dispatch(account_id="A1")
    await _deliver(captured, run.id, JobKind.RUN, once=True)  # starts the child, parks
    child_id = child_run_id(run.id, "handle")
    await _deliver(captured, child_id, JobKind.RUN, once=True)  # the child parks at notify
    assert kinds(await child.get(child_id), "run.parked")
    assert await storage.gate_holders(f"{key}:A1") == [child_id]
    with pytest.raises(rf.GateBusy):
        await other.run(account_id="A1")
    await _deliver(captured, child_id)
    assert (await child.get(child_id)).status is rf.Status.COMPLETED
    assert await storage.gate_holders(f"{key}:A1") == []
    await _deliver(captured, run.id)
    assert (await flow.get(run.id)).status is rf.Status.COMPLETED
