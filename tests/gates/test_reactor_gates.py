"""A reactor's own gates, taken by `run()` in its caller, on both storage backends."""

from __future__ import annotations

import time

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.runtime.gates import waiting
from tests.helpers import unique


class Account(msgspec.Struct):
    account_id: str


async def test_fifty_concurrent_runs_hold_a_lock_one_at_a_time(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("mutex"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}", wait=60)])
    in_flight = peak = 0

    @flow.step
    async def work(account_id: str) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.001)  # a chance for another run to overlap, if the lock let it
        in_flight -= 1
        return 1

    runs: list[rf.Run] = []

    async def one() -> None:
        runs.append(await flow.run(account_id="A1"))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(one)
    assert [r.status for r in runs] == [rf.Status.COMPLETED] * 50
    assert peak == 1
    assert await storage.gate_holders("acct:A1") == []


async def test_a_semaphore_admits_exactly_its_limit(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("pool"), inputs=Account,
                      gates=[rf.Semaphore("pool:{account_id}", limit=3, wait=60)])
    in_flight = peak = 0
    full = anyio.Event()

    @flow.step
    async def work(account_id: str) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 3:
            full.set()
        await full.wait()  # the first three meet here: proof that three may run at once
        await anyio.sleep(0.001)
        in_flight -= 1
        return 1

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(lambda: flow.run(account_id="A1"))
    assert peak == 3


async def test_a_busy_lock_raises_gate_busy_and_stores_nothing(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("busy"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}", wait=0)])
    entered, leave = anyio.Event(), anyio.Event()

    @flow.step
    async def work(account_id: str) -> str:
        if account_id == "A1":
            entered.set()
            await leave.wait()
        return account_id

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: flow.run(account_id="A1"))
            await entered.wait()
            with pytest.raises(rf.GateBusy) as caught:
                await flow.run(account_id="A1")
            other = await flow.run(account_id="B2")  # another key is free
            leave.set()
    busy = caught.value
    assert (busy.gate, busy.key, busy.retry_after) == ("lock", "acct:A1", None)
    assert "acct:A1" in str(busy)
    assert other.status is rf.Status.COMPLETED
    page = await flow.list_runs(limit=10)
    assert len(page.runs) == 2  # the refused start stored nothing


async def test_a_waiting_caller_is_woken_by_the_release(storage: rf.Storage,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "RECHECK", 600.0)  # only the notification can wake it in time
    flow = rf.Reactor(unique("wake"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}", wait=300)])
    entered, leave = anyio.Event(), anyio.Event()
    order: list[str] = []

    @flow.step
    async def work(account_id: str) -> str:
        order.append("start")
        entered.set()
        if len(order) == 1:
            await leave.wait()
        return account_id

    async def second() -> None:
        await flow.run(account_id="A1")
        order.append("second done")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: flow.run(account_id="A1"))
            await entered.wait()
            tg.start_soon(second)
            await anyio.sleep(0.05)
            assert order == ["start"]  # the second waits...
            leave.set()  # ...until the first releases
    assert order == ["start", "start", "second done"]


async def test_released_on_failure_and_while_paused(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("release"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}")])

    @flow.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    @flow.step
    async def settle(approve: bool) -> str:
        if not approve:
            raise ValueError("declined")
        return "ok"

    first = await flow.run(account_id="A1")
    assert first.status is rf.Status.PAUSED
    assert await storage.gate_holders("acct:A1") == []
    second = await flow.run(account_id="A1")  # the paused run does not hold the lock
    assert second.status is rf.Status.PAUSED
    done = await flow.continue_(first.id, step="approve", payload=True)
    assert done.status is rf.Status.COMPLETED
    failed = await flow.continue_(second.id, step="approve", payload=False)
    assert failed.status is rf.Status.FAILED
    assert await storage.gate_holders("acct:A1") == []


async def test_a_paused_run_whose_lock_is_busy_is_resumed_by_a_worker(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("retake"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}", wait=0)])

    @flow.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    @flow.step
    async def settle(approve: bool) -> bool:
        return approve

    paused = await flow.run(account_id="A1")
    await storage.gate_acquire("acct:A1", "someone-else", limit=1, ttl=60)
    resumed = await flow.continue_(paused.id, step="approve", payload=True)
    assert resumed.status is rf.Status.RUNNING  # the lock is busy: a worker finishes it
    await storage.gate_release("acct:A1", "someone-else")
    with anyio.fail_after(30):
        done = await flow.wait(paused.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and done.value is True


async def test_cancelled_runs_release(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("cancel"), inputs=Account, gates=[rf.Lock("acct:{account_id}")])
    entered, leave = anyio.Event(), anyio.Event()

    @flow.step
    async def first(account_id: str) -> str:
        entered.set()
        await leave.wait()
        return account_id

    @flow.step
    async def second(first: str) -> str:
        return first

    result: list[rf.Run] = []

    async def start() -> None:
        result.append(await flow.run(account_id="A1"))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await entered.wait()
            run_id = (await flow.list_runs(limit=1)).runs[0].id
            await flow.cancel(run_id, reason="stop")
            leave.set()
    assert result[0].status is rf.Status.CANCELLED
    assert await storage.gate_holders("acct:A1") == []


async def test_a_crashed_holders_lock_lapses_after_its_ttl(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("lapse"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}", ttl=1, wait=30)])

    @flow.step
    async def work(account_id: str) -> str:
        return account_id

    await storage.gate_acquire("acct:A1", "crashed-run", limit=1, ttl=1)  # it never releases
    with anyio.fail_after(30):
        run = await flow.run(account_id="A1")
    assert run.status is rf.Status.COMPLETED


async def test_a_live_holder_keeps_its_lock_past_the_ttl(storage: rf.Storage) -> None:
    rf.configure(lock_ttl=3)
    flow = rf.Reactor(unique("alive"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}", ttl=0.6)])
    held: list[list[str]] = []

    @flow.step
    async def work(account_id: str) -> str:
        until = time.monotonic() + 2.0  # more than three TTLs
        while time.monotonic() < until:
            held.append(await storage.gate_holders("acct:A1"))
            await anyio.sleep(0.1)
        return account_id

    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.COMPLETED
    assert len(held) > 10 and all(h == [run.id] for h in held)


async def test_a_key_rendering_empty_is_an_error_naming_the_gate(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("empty"), inputs=Account, gates=[rf.Lock("{account_id}")])

    @flow.step
    async def work(account_id: str) -> str:
        return account_id

    with pytest.raises(rf.GateKeyError) as caught:
        await flow.run(account_id="")
    assert "lock" in str(caught.value) and "'{account_id}'" in str(caught.value)
    assert "empty" in str(caught.value)


def _in_line_then_locked(name: str) -> rf.Reactor:
    """A reactor whose worker meets a busy lock: `dispatch` takes only its place in the ordered
    line, the worker takes the lock in the run's turn."""
    return rf.Reactor(unique(name), inputs=Account,
                      gates=[rf.OrderedLock("line:{account_id}"),
                             rf.Lock("acct:{account_id}", wait=60)])


async def test_a_worker_snoozes_until_the_cap_then_fails_the_run(storage: rf.Storage) -> None:
    rf.configure(gate_snooze=0.05, gate_snooze_limit=3)
    flow = _in_line_then_locked("capped")
    ran: list[str] = []

    @flow.step
    async def work(account_id: str) -> str:
        ran.append(account_id)
        return account_id

    await storage.gate_acquire("acct:A1", "someone-else", limit=1, ttl=600)
    started = await flow.dispatch(account_id="A1")
    with anyio.fail_after(30):
        done = await flow.wait(started.id, timeout=30)
    assert done.status is rf.Status.FAILED and ran == []
    assert done.error is not None and done.error.type == "GateBusy"
    assert "3 snoozes" in done.error.message and "gate_snooze_limit" in done.error.message
    assert sum(1 for e in done.history if e.kind == "run.snoozed") == 3


async def test_a_dispatched_run_waits_in_a_worker_without_failing(storage: rf.Storage) -> None:
    rf.configure(gate_snooze=0.05)
    flow = _in_line_then_locked("snoozes")

    @flow.step
    async def work(account_id: str) -> str:
        return account_id

    await storage.gate_acquire("acct:A1", "someone-else", limit=1, ttl=600)
    started = await flow.dispatch(account_id="A1")
    with anyio.fail_after(30):
        while not any(e.kind == "run.snoozed" for e in (await flow.get(started.id)).history):
            await anyio.sleep(0.02)
    await storage.gate_release("acct:A1", "someone-else")
    done = await flow.wait(started.id, timeout=30)
    assert done.status is rf.Status.COMPLETED


async def test_dispatch_raises_gate_busy_in_the_caller_and_stores_nothing(
        storage: rf.Storage) -> None:
    """A reactor gate busy past its `wait` refuses `dispatch()` as it refuses `run()`: the
    caller gets `rf.GateBusy`, nothing is stored, nothing is enqueued."""
    flow = rf.Reactor(unique("dbusy"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}"),
                             rf.Semaphore("sem:{account_id}", limit=1)])
    ran: list[str] = []

    @flow.step
    async def work(account_id: str) -> str:
        ran.append(account_id)
        return account_id

    await storage.gate_acquire("acct:A1", "someone-else", limit=1, ttl=600)
    with pytest.raises(rf.GateBusy) as caught:
        await flow.dispatch(account_id="A1")
    assert (caught.value.gate, caught.value.key, caught.value.retry_after) == (
        "lock", "acct:A1", None)
    await storage.gate_acquire("sem:A2", "someone-else", limit=1, ttl=600)
    with pytest.raises(rf.GateBusy) as caught:
        await flow.dispatch(account_id="A2")
    assert (caught.value.gate, caught.value.key) == ("semaphore", "sem:A2")
    assert await storage.gate_holders("acct:A2") == []  # the lock it took was given back
    assert (await flow.list_runs(limit=10)).runs == []
    assert ran == []


async def test_a_dispatch_caller_waits_then_hands_its_places_to_the_worker(
        storage: rf.Storage) -> None:
    """With `wait=`, the caller of `dispatch()` waits for the release (notified), takes the
    lock and hands it to the run's worker: nobody can take it between the two."""
    flow = rf.Reactor(unique("dwait"), inputs=Account,
                      gates=[rf.Lock("acct:{account_id}", wait=300),
                             rf.RateLimit("rate:{account_id}", hour=1)])
    proceed = anyio.Event()
    holders_while_running: list[list[str]] = []

    @flow.step
    async def work(account_id: str) -> str:
        holders_while_running.append(await storage.gate_holders(f"acct:{account_id}"))
        return account_id

    await storage.gate_acquire("acct:A1", "someone-else", limit=1, ttl=600)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            async def start() -> None:
                proceed.set()
                started.append(await flow.dispatch(account_id="A1"))

            started: list[rf.Run] = []
            tg.start_soon(start)
            await proceed.wait()
            await anyio.sleep(0)
            await storage.gate_release("acct:A1", "someone-else")
        run = started[0]
        assert await storage.gate_holders("acct:A1") in ([run.id], [])  # handed over, or done
        done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    assert holders_while_running == [[run.id]]  # the worker held the caller's lock
    assert await storage.gate_holders("acct:A1") == []
    assert await storage.rate_charge("rate:A1", [(3600, 1)], "probe") is not None  # charged once


async def test_an_uncontended_lock_is_released_by_the_final_save(
        storage: rf.Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """The release rides in the run's last write (one round trip fewer): no gate_release call
    of its own, and the lock is free once the run is stored."""
    flow = rf.Reactor(unique("folded"), inputs=Account, gates=[rf.Lock("acct:{account_id}")])

    @flow.step
    async def work(account_id: str) -> str:
        return account_id

    calls: list[str] = []
    original = storage.gate_release

    async def counted(key: str, holder: str) -> bool:
        calls.append(key)
        return await original(key, holder)

    monkeypatch.setattr(storage, "gate_release", counted)
    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.COMPLETED
    assert calls == []
    assert await storage.gate_holders("acct:A1") == []
    again = await flow.run(account_id="A1")
    assert again.status is rf.Status.COMPLETED
