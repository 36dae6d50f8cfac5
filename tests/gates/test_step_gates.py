"""Step gates, rate limits, periods, rollback re-taking locks, and the deadlock guard (both
storage backends, in a caller)."""

from __future__ import annotations

import threading

import anyio
import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Account(msgspec.Struct):
    account_id: str


async def test_a_busy_step_lock_fails_the_step_and_rolls_back(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("steplock"), inputs=Account)
    calls: list[str] = []

    @flow.step
    async def reserve(account_id: str) -> str:
        return "r1"

    @reserve.undo
    async def unreserve(result: str) -> None:
        calls.append(f"undo {result}")

    @flow.step(gates=[rf.Lock("acct:{account_id}")])
    async def charge(account_id: str, reserve: str) -> str:
        calls.append("charge body")
        return "c1"

    @charge.compensate
    async def refund(error: Exception) -> None:
        calls.append("compensate")

    await storage.gate_acquire("acct:A1", "another-run", limit=1, ttl=60)
    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.FAILED
    assert run.error is not None
    assert (run.error.step, run.error.type) == ("charge", "GateBusy")
    assert "acct:A1" in run.error.message
    assert calls == ["undo r1"]  # its body never ran: no compensate; earlier steps undone


async def test_a_step_lock_is_held_around_its_attempts(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("around"), inputs=Account)
    seen: list[list[str]] = []

    @flow.step(gates=[rf.Lock("acct:{account_id}")],
               retries=rf.Retry(attempts=3, backoff=0))
    async def charge(account_id: str, ctx: rf.StepContext) -> int:
        seen.append(await storage.gate_holders("acct:A1"))
        if ctx.attempt < 3:
            raise ConnectionError("flaky")
        return ctx.attempt

    run = await flow.run(account_id="A1")
    assert run.value == 3
    assert seen == [[run.id]] * 3
    assert await storage.gate_holders("acct:A1") == []


async def test_a_step_re_enters_its_reactors_lock(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("reenter"), inputs=Account, gates=[rf.Lock("acct:{account_id}")])

    @flow.step(gates=[rf.Lock("acct:{account_id}")])
    async def charge(account_id: str) -> str:
        return account_id

    @flow.step
    async def after(charge: str) -> list[str]:
        return await storage.gate_holders("acct:A1")  # still the run's after the step left

    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.COMPLETED
    assert run.value == [run.id]


async def test_rollback_re_takes_the_steps_lock(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("rollback"), inputs=Account)
    during_undo: list[list[str]] = []

    @flow.step(gates=[rf.Lock("acct:{account_id}")])
    async def debit(account_id: str) -> str:
        return "d1"

    @debit.undo
    async def credit(result: str) -> None:
        during_undo.append(await storage.gate_holders("acct:A1"))

    @flow.step
    async def explode(debit: str) -> None:
        assert await storage.gate_holders("acct:A1") == []  # released after debit
        raise RuntimeError("boom")

    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.FAILED
    assert during_undo == [[run.id]]


async def test_a_rollback_whose_lock_stays_busy_is_a_rollback_failure(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("rbbusy"), inputs=Account)
    undone: list[str] = []

    @flow.step(gates=[rf.Lock("acct:{account_id}")])
    async def debit(account_id: str) -> str:
        return "d1"

    @debit.undo
    async def credit(result: str) -> None:
        undone.append(result)

    @flow.step
    async def explode(debit: str, account_id: str) -> None:
        await storage.gate_acquire(f"acct:{account_id}", "intruder", limit=1, ttl=60)
        raise RuntimeError("boom")

    run = await flow.run(account_id="A1")
    assert run.error is not None
    assert [(f.step, f.kind) for f in run.error.rollback_failures] == [("debit", "undo")]
    assert "acct:A1" in run.error.rollback_failures[0].message
    assert undone == []


async def test_a_rate_limit_charges_a_run_once(storage: rf.Storage) -> None:
    name = unique("stripe")
    flow = rf.Reactor(unique("rated"), inputs=Account, gates=[rf.RateLimit(name, hour=1)])

    @flow.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    @flow.step(retries=rf.Retry(attempts=2, backoff=0))
    async def settle(approve: bool, ctx: rf.StepContext) -> int:
        if ctx.attempt == 1:
            raise ConnectionError("flaky")
        return ctx.attempt

    first = await flow.run(account_id="A1")
    assert first.status is rf.Status.PAUSED
    done = await flow.continue_(first.id, step="approve", payload=True)
    assert done.status is rf.Status.COMPLETED  # not charged again on resume
    with pytest.raises(rf.GateBusy) as caught:
        await flow.run(account_id="A2")
    assert caught.value.gate == "rate_limit" and caught.value.key == name
    assert caught.value.retry_after is not None and 0 < caught.value.retry_after <= 3600


async def test_a_step_rate_limit_is_charged_once_across_retries(storage: rf.Storage) -> None:
    name = unique("api")
    flow = rf.Reactor(unique("steprate"))

    @flow.step(gates=[rf.RateLimit(name, minute=1)], retries=rf.Retry(attempts=3, backoff=0))
    async def call(ctx: rf.StepContext) -> int:
        if ctx.attempt < 3:
            raise ConnectionError("flaky")
        return ctx.attempt

    run = await flow.run()
    assert run.value == 3
    second = await flow.run()
    assert second.error is not None and second.error.type == "GateBusy"


async def test_a_reactor_period_halts_later_runs_but_failures_do_not_count(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("monthly"), inputs=Account,
                      gates=[rf.Period(unique("invoice") + ":{account_id}", every="month")])
    ran: list[str] = []

    @flow.step
    async def invoice(account_id: str) -> str:
        ran.append(account_id)
        if account_id == "FAIL":
            raise ValueError("no")
        return account_id

    failed = await flow.run(account_id="FAIL")
    assert failed.status is rf.Status.FAILED
    again = await flow.run(account_id="FAIL")
    assert again.status is rf.Status.FAILED  # the failure did not use the period
    first = await flow.run(account_id="A1")
    assert first.status is rf.Status.COMPLETED
    later = await flow.run(account_id="A1")
    assert later.status is rf.Status.HALTED and later.halt_reason == "period"
    assert later.steps["invoice"].status == "pending"
    assert (await flow.get(later.id)).halt_reason == "period"  # stored and readable
    assert ran == ["FAIL", "FAIL", "A1"]
    other = await flow.run(account_id="B2")  # another key has its own period
    assert other.status is rf.Status.COMPLETED


async def test_a_step_period_skips_the_step(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("stepperiod"))
    key = unique("daily")

    @flow.step(gates=[rf.Period(key, every=3600)])
    async def digest() -> str:
        return "sent"

    @flow.step
    async def report(digest: str = "skipped") -> str:
        return digest

    assert (await flow.run()).value == "sent"
    second = await flow.run()
    assert second.status is rf.Status.COMPLETED
    assert second.steps["digest"].status == "skipped" and second.value == "skipped"


async def test_the_deadlock_guard_refuses_before_enqueueing(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("guard"), inputs=Account, gates=[rf.Lock("acct:{account_id}")])
    started: list[str] = []

    @flow.async_step(gates=[rf.Lock("acct:{account_id}")])
    async def notify(account_id: str) -> str:
        started.append(account_id)
        return account_id

    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.FAILED
    assert run.error is not None
    assert (run.error.step, run.error.type) == ("notify", "GateDeadlock")
    assert "acct:A1" in run.error.message
    assert run.steps["notify"].status == "failed"
    assert started == []


async def test_the_deadlock_guard_sees_a_child_reactors_own_lock(storage: rf.Storage) -> None:
    child = rf.Reactor(unique("child"), inputs=Account,
                       gates=[rf.Semaphore("acct:{account_id}", limit=1)])

    @child.step
    async def inner(account_id: str) -> str:
        return account_id

    flow = rf.Reactor(unique("parent"), inputs=Account)

    @flow.step(gates=[rf.Semaphore("acct:{account_id}", limit=1)])
    async def hold(account_id: str) -> str:
        return account_id

    @flow.async_reactor(child, after=[hold])
    async def spawn(account_id: str) -> dict[str, str]:
        return {"account_id": account_id}

    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.COMPLETED  # the step let go before the dispatch
    # the async child holds "acct:A1" while it runs: its final state shows it let go
    spawned = await child.wait(f"{run.id}-spawn", timeout=30)
    assert spawned.status is rf.Status.COMPLETED

    flow2 = rf.Reactor(unique("parent2"), inputs=Account,
                       gates=[rf.Lock("acct:{account_id}")])

    @flow2.async_reactor(child)
    async def spawn2(account_id: str) -> dict[str, str]:
        return {"account_id": account_id}

    refused = await flow2.run(account_id="A1")
    assert refused.error is not None and refused.error.type == "GateDeadlock"


async def test_a_step_key_rendering_empty_fails_the_step(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("stepempty"), inputs=Account)

    @flow.step(gates=[rf.Semaphore(lambda account_id: account_id.strip(), limit=2)])
    async def work(account_id: str) -> str:
        return account_id

    run = await flow.run(account_id="   ")
    assert run.error is not None and run.error.type == "GateKeyError"
    assert "empty" in run.error.message and "semaphore" in run.error.message


async def test_step_waiters_queue_for_a_semaphore(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("stepsem"), inputs=Account)
    in_flight = peak = 0

    @flow.step(gates=[rf.Semaphore("wh:{account_id}", limit=2, wait=60)])
    async def pick(account_id: str) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.001)
        in_flight -= 1
        return 1

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(lambda: flow.run(account_id="W"))
    assert peak <= 2


async def test_re_entrancy_through_compose(storage: rf.Storage) -> None:
    lock = rf.Lock("acct:{account_id}")
    child = rf.Reactor(unique("child"), inputs=Account, gates=[lock])

    @child.step(gates=[lock])
    async def inner(account_id: str) -> list[str]:
        return await storage.gate_holders(f"acct:{account_id}")

    flow = rf.Reactor(unique("parent"), inputs=Account, gates=[lock])

    @flow.compose(child, gates=[lock])
    async def nested(account_id: str) -> Account:
        return Account(account_id)

    run = await flow.run(account_id="A1")
    assert run.status is rf.Status.COMPLETED
    assert run.value == [run.id]  # one holder: the root run, re-entered at every level
    assert await storage.gate_holders("acct:A1") == []


async def test_a_composed_childs_own_lock_excludes_other_runs(storage: rf.Storage) -> None:
    child = rf.Reactor(unique("child"), inputs=Account,
                       gates=[rf.Semaphore("wh:{account_id}", limit=1)])

    @child.step
    async def inner(account_id: str) -> list[str]:
        return await storage.gate_holders(f"wh:{account_id}")

    flow = rf.Reactor(unique("parent"), inputs=Account)

    @flow.compose(child)
    async def nested(account_id: str) -> Account:
        return Account(account_id)

    run = await flow.run(account_id="A1")
    assert run.value == [f"{run.id}|nested"]
    await storage.gate_acquire("wh:A1", "other", limit=1, ttl=60)
    refused = await flow.run(account_id="A1")
    assert refused.error is not None
    assert (refused.error.step, refused.error.type) == ("nested", "GateBusy")


async def test_a_map_holds_its_gates_while_its_elements_run(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("mapgate"), inputs=Account)
    seen: list[list[str]] = []

    @flow.step
    async def letters(account_id: str) -> list[str]:
        return list(account_id)

    @flow.map_step(over="letters", gates=[rf.Lock("map:{account_id}")])
    async def each(letter: str, account_id: str) -> str:
        seen.append(await storage.gate_holders(f"map:{account_id}"))
        return letter

    run = await flow.run(account_id="AB")
    assert run.status is rf.Status.COMPLETED
    assert seen == [[run.id], [run.id]]
    assert await storage.gate_holders("map:AB") == []
    await storage.gate_acquire("map:AB", "other", limit=1, ttl=60)
    refused = await flow.run(account_id="AB")
    assert refused.error is not None and refused.error.type == "GateBusy"


class GateRecorder(rf.Middleware):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def on_gate(self, event: rf.GateEvent) -> None:
        self.events.append((event.action, event.gate, event.key, event.step))


async def test_middleware_sees_every_acquire_contention_and_release(
        storage: rf.Storage) -> None:
    recorder = GateRecorder()
    flow = rf.Reactor(unique("observed"), inputs=Account, middleware=[recorder],
                      gates=[rf.Lock("acct:{account_id}")])

    @flow.step(gates=[rf.Semaphore("pool:{account_id}", limit=1)])
    async def work(account_id: str) -> str:
        return account_id

    await flow.run(account_id="A1")
    assert recorder.events == [
        ("acquired", "lock", "acct:A1", ""),
        ("acquired", "semaphore", "pool:A1", "work"),
        ("released", "semaphore", "pool:A1", "work"),
        ("released", "lock", "acct:A1", ""),
    ]
    recorder.events.clear()
    await storage.gate_acquire("acct:A2", "other", limit=1, ttl=60)
    with pytest.raises(rf.GateBusy):
        await flow.run(account_id="A2")
    assert recorder.events == [("busy", "lock", "acct:A2", "")]


async def test_a_step_put_back_for_a_gate_says_so_in_run_steps(storage: rf.Storage) -> None:
    rf.configure(gate_snooze=0.05)
    flow = rf.Reactor(unique("shows"), inputs=Account)

    @flow.step(gates=[rf.Lock("acct:{account_id}")])
    async def work(account_id: str) -> str:
        return account_id

    await storage.gate_acquire("acct:A1", "other", limit=1, ttl=60)
    started = await flow.dispatch(account_id="A1")
    with anyio.fail_after(30):
        while (run := await flow.get(started.id)).steps["work"].gate is None:
            await anyio.sleep(0.02)
    assert run.steps["work"].status == "pending"
    assert run.steps["work"].gate == "lock 'acct:A1'"
    await storage.gate_release("acct:A1", "other")
    done = await flow.wait(started.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and done.steps["work"].gate is None


async def test_an_async_steps_snoozes_are_capped(storage: rf.Storage) -> None:
    """A unit whose gate stays busy is put back at most `gate_snooze_limit` times, then fails
    with an error naming the gate, the key and the number of snoozes (its body never ran)."""
    rf.configure(gate_snooze=0.02, gate_snooze_limit=3)
    flow = rf.Reactor(unique("unitcap"), inputs=Account)
    ran: list[str] = []

    @flow.async_step(gates=[rf.Lock("unit:{account_id}")])
    async def notify(account_id: str) -> str:
        ran.append(account_id)
        return account_id

    @flow.step
    async def after(notify: str) -> str:
        return notify

    await storage.gate_acquire("unit:A1", "someone-else", limit=1, ttl=60)
    started = await flow.dispatch(account_id="A1")
    done = await flow.wait(started.id, timeout=30)
    assert done.status is rf.Status.FAILED and ran == []
    notify_step = done.steps["notify"]
    assert notify_step.status == "failed" and notify_step.error is not None
    message = notify_step.error
    assert message.startswith("GateBusy:") and "lock 'unit:A1'" in message
    assert "3 snoozes" in message and "gate_snooze_limit" in message
    assert done.error is not None and "3 snoozes" in done.error.message  # `after` read it


async def test_a_fanned_out_map_keeps_its_gates_while_parked(storage: rf.Storage) -> None:
    """A map's gates are held for the map as a whole: a fanned-out map keeps them while the run
    is parked and its elements run in workers (their jobs renew them); another run for the
    same key is refused meanwhile; the map gives them back when it completes."""
    flow = rf.Reactor(unique("fanlock"), inputs=Account)
    seen: list[list[str]] = []
    in_element, finish = threading.Event(), threading.Event()  # elements run in the worker

    @flow.step
    async def letters(account_id: str) -> list[str]:
        return ["x", "y", "z"]

    @flow.map_step(over="letters", fan_out=True, batch_size=1,
                   gates=[rf.Lock("fan:{account_id}"), rf.Semaphore("fans:{account_id}",
                                                                    limit=1)])
    async def each(letter: str, account_id: str) -> str:
        seen.append([*await storage.gate_holders(f"fan:{account_id}"),
                     *await storage.gate_holders(f"fans:{account_id}")])
        if letter == "x":
            in_element.set()
            await anyio.to_thread.run_sync(finish.wait, 60)
        return letter

    started = await flow.run(account_id="F1")
    assert started.status is rf.Status.RUNNING  # parked at the map
    assert await anyio.to_thread.run_sync(in_element.wait, 30)
    other = await flow.run(account_id="F1")  # the same key, while the first is parked
    assert other.status is rf.Status.FAILED and other.error is not None
    assert other.error.type == "GateBusy" and "fan:F1" in other.error.message
    finish.set()
    done = await flow.wait(started.id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    assert seen == [[started.id, f"{started.id}|each"]] * 3
    assert await storage.gate_holders("fan:F1") == []
    assert await storage.gate_holders("fans:F1") == []


async def test_a_step_re_entering_its_reactors_lock_leaves_it_guarded(
        storage: rf.Storage) -> None:
    """After a step re-entered its reactor's lock, the run still holds it: the deadlock guard
    still refuses an async step that needs it (and the keeper still renews it)."""
    flow = rf.Reactor(unique("reenter"), inputs=Account, gates=[rf.Lock("re:{account_id}")])

    @flow.step(gates=[rf.Lock("re:{account_id}")])
    async def first(account_id: str) -> str:
        return account_id

    @flow.async_step(gates=[rf.Lock("re:{account_id}")], after=["first"])
    async def later(account_id: str) -> str:
        return account_id

    run = await flow.run(account_id="R1")
    assert run.status is rf.Status.FAILED and run.error is not None
    assert (run.error.step, run.error.type) == ("later", "GateDeadlock")
