"""`rf.explain(run_id)`: each kind of blocker produced by a real situation (a run waiting for a
payload, sleeping under the fake clock, snoozed for a gate another run holds, a spent rate
limit, an ordered lock with runs ahead, dispatched with no worker, between retry attempts, an
async unit out, held, rolling back, a stale owner), on both backends (api.md §16)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import anyio
import msgspec
import pytest
from dramatiq.brokers.stub import StubBroker

import reactorflow as rf
from reactorflow import config
from reactorflow.runtime.services.heartbeats import Heartbeat
from reactorflow.testing import Environment
from tests.helpers import unique


class Account(msgspec.Struct):
    account_id: str


class Approval(msgspec.Struct):
    ok: bool


@pytest.fixture(params=["rf_env", "rf_redis_env"])
def env(request: pytest.FixtureRequest) -> Environment:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def _at(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)


def _aware(blocker: rf.Blocker) -> None:
    for moment in (blocker.since, blocker.until):
        assert moment is None or moment.tzinfo is UTC
    assert "\n" not in blocker.detail and blocker.detail


async def _until(check: Callable[[], Awaitable[list[rf.Blocker]]]) -> list[rf.Blocker]:
    """`check()` once it finds a blocker (the situation is set up by work running beside the
    test: a worker parking the run, a rollback beginning)."""
    with anyio.fail_after(30):
        while not (found := await check()):
            await anyio.sleep(0.01)
    return found


async def _hold_in_a_step(flow: rf.Reactor, release: anyio.Event, entered: anyio.Event,
                          tg: anyio.abc.TaskGroup, **inputs: str) -> rf.Run:
    """Start a run of `flow` in the background whose first step waits for `release`; return it
    once the step has begun (the run holds its gates)."""
    runs: list[rf.Run] = []
    tg.start_soon(lambda: _collect(runs, flow.run(**inputs)))
    await entered.wait()
    page = await rf.list_runs(reactor=flow.name, limit=5)
    assert page.runs
    return await flow.get(page.runs[-1].id)


async def _collect(runs: list[rf.Run], run: Awaitable[rf.Run]) -> None:
    runs.append(await run)


async def test_an_unknown_run_is_run_not_found(env: Environment) -> None:
    with pytest.raises(rf.RunNotFound):
        await rf.explain("no-such-run")
    with pytest.raises(rf.RunNotFound):
        await rf.explain("")


async def test_an_ended_run_has_no_blockers(env: Environment) -> None:
    flow = rf.Reactor(unique("why_done"))

    @flow.step
    async def one() -> int:
        return 1

    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert await rf.explain(run.id) == []


async def test_an_interrupt_waits_for_its_payload_until_its_timeout(env: Environment) -> None:
    flow = rf.Reactor(unique("why_interrupt"))

    @flow.interrupt(timeout=timedelta(hours=1))
    async def approve(payload: Approval) -> bool:
        return payload.ok

    run = await flow.run()
    assert run.status is rf.Status.PAUSED
    [blocker] = await rf.explain(run.id)
    _aware(blocker)
    assert (blocker.kind, blocker.step) == (rf.BlockerKind.INTERRUPT, "approve")
    assert blocker.until is not None and run.timeout_at is not None
    assert blocker.until.timestamp() == pytest.approx(run.timeout_at)
    assert blocker.since is not None and blocker.since <= blocker.until
    assert "approve" in blocker.detail


async def test_a_sleeping_run_sleeps_until_its_deadline(env: Environment) -> None:
    flow = rf.Reactor(unique("why_sleep"))

    @flow.sleep
    async def nap() -> timedelta:
        return timedelta(hours=2)

    @flow.step
    async def after(nap: datetime) -> str:
        return "awake"

    start = env.clock.now()
    run = await flow.run()
    [blocker] = await rf.explain(run.id)
    _aware(blocker)
    assert (blocker.kind, blocker.step) == (rf.BlockerKind.SLEEP, "nap")
    assert blocker.until == run.steps["nap"].wake_at
    assert blocker.until is not None
    assert blocker.until.timestamp() == pytest.approx(start + 7200, abs=0.01)
    await env.clock.advance(7200)
    await env.drain()
    assert (await flow.get(run.id)).status is rf.Status.COMPLETED
    assert await rf.explain(run.id) == []


async def test_a_run_snoozed_for_a_lock_names_the_run_holding_it(env: Environment) -> None:
    flow = rf.Reactor(unique("why_lock"), inputs=Account)
    entered, release = anyio.Event(), anyio.Event()

    @flow.step(gates=[rf.Lock("why:{account_id}", ttl=600)])
    async def work(account_id: str) -> str:
        entered.set()
        await release.wait()
        return account_id

    async with anyio.create_task_group() as tg:
        holder = await _hold_in_a_step(flow, release, entered, tg, account_id="A1")
        waiter = await flow.dispatch(account_id="A1")
        await env.drain()  # the worker finds the lock busy and snoozes the run
        [blocker] = await rf.explain(waiter.id)
        _aware(blocker)
        assert (blocker.kind, blocker.step, blocker.holder) == (rf.BlockerKind.GATE, "work",
                                                                holder.id)
        assert blocker.until is None and "why:A1" in blocker.detail
        assert holder.id in blocker.detail
        assert await rf.explain(holder.id) == []  # it is moving
        release.set()
    await env.clock.advance(5)
    await env.drain()
    assert (await flow.get(waiter.id)).status is rf.Status.COMPLETED
    assert await rf.explain(waiter.id) == []


async def test_a_step_snoozed_for_a_semaphore_names_its_step_and_holder(env: Environment
                                                                        ) -> None:
    flow = rf.Reactor(unique("why_sem"), inputs=Account)
    entered, release = anyio.Event(), anyio.Event()

    @flow.step(gates=[rf.Semaphore("pool:{account_id}", limit=1, ttl=600)])
    async def work(account_id: str) -> str:
        entered.set()
        await release.wait()
        return account_id

    async with anyio.create_task_group() as tg:
        holder = await _hold_in_a_step(flow, release, entered, tg, account_id="A1")
        waiter = await flow.dispatch(account_id="A1")
        await env.drain()
        [blocker] = await rf.explain(waiter.id)
        assert (blocker.kind, blocker.step, blocker.holder) == (rf.BlockerKind.GATE, "work",
                                                                holder.id)
        release.set()


async def test_a_spent_rate_limit_says_when_its_window_frees(env: Environment) -> None:
    flow = rf.Reactor(unique("why_rate"), inputs=Account)

    @flow.step(gates=[rf.RateLimit("api:{account_id}", hour=1)])
    async def call(account_id: str) -> str:
        return account_id

    start = env.clock.now()
    assert (await flow.run(account_id="A1")).status is rf.Status.COMPLETED
    waiter = await flow.dispatch(account_id="A1")
    await env.drain()
    [blocker] = await rf.explain(waiter.id)
    _aware(blocker)
    assert (blocker.kind, blocker.step, blocker.holder) == (rf.BlockerKind.RATE_LIMIT, "call",
                                                            None)
    window_end = (start // 3600 + 1) * 3600
    assert blocker.until is not None
    assert blocker.until.timestamp() == pytest.approx(window_end, abs=1)


async def test_an_ordered_turn_counts_the_runs_ahead_and_names_the_head(env: Environment
                                                                        ) -> None:
    flow = rf.Reactor(unique("why_ordered"), inputs=Account,
                      gates=[rf.OrderedLock("ledger:{account_id}")])
    entered, release = anyio.Event(), anyio.Event()

    @flow.step
    async def post(account_id: str) -> str:
        entered.set()
        await release.wait()
        return account_id

    async with anyio.create_task_group() as tg:
        head = await _hold_in_a_step(flow, release, entered, tg, account_id="L1")
        second = await flow.dispatch(account_id="L1")
        await env.drain()
        third = await flow.dispatch(account_id="L1")
        await env.drain()
        [behind_one] = await rf.explain(second.id)
        [behind_two] = await rf.explain(third.id)
        for blocker in (behind_one, behind_two):
            _aware(blocker)
            assert (blocker.kind, blocker.holder) == (rf.BlockerKind.ORDERED_TURN, head.id)
        assert "1 run(s) ahead" in behind_one.detail
        assert "2 run(s) ahead" in behind_two.detail
        release.set()


async def test_a_dispatched_run_with_no_worker_is_queued(storage: rf.Storage) -> None:
    rf.configure(broker=StubBroker())  # a broker that no worker consumes
    flow = rf.Reactor(unique("why_queued"))

    @flow.step
    async def one() -> int:
        return 1

    run = await flow.dispatch()
    [blocker] = await rf.explain(run.id)
    _aware(blocker)
    assert blocker.kind is rf.BlockerKind.QUEUED and blocker.until is None
    assert blocker.since is not None and blocker.waited is not None and blocker.waited >= 0
    assert blocker.workers == 0  # no heartbeat: nobody serves the queue, and it says so
    assert "no live worker serves queue 'reactorflow'" in blocker.detail


async def test_a_queued_run_counts_the_live_workers_serving_its_queue(
        storage: rf.Storage) -> None:
    """By their heartbeats: one process beating for the queue, one for another queue only."""
    rf.configure(broker=StubBroker())  # jobs stay queued: nobody consumes this broker
    flow = rf.Reactor(unique("why_served"))

    @flow.step
    async def one() -> int:
        return 1

    run = await flow.dispatch()
    serving, elsewhere = Heartbeat(), Heartbeat()
    serving.start(["reactorflow"])
    elsewhere.start(["other"])
    try:
        with anyio.fail_after(10):  # each beats at once, on its own thread
            while len(await rf.list_workers()) < 2:
                await anyio.sleep(0.02)
        [blocker] = await rf.explain(run.id)
    finally:
        serving.stop()
        elsewhere.stop()
    assert blocker.kind is rf.BlockerKind.QUEUED
    assert blocker.workers == 1 and "1 live worker(s) serve queue 'reactorflow'" in blocker.detail
    [after] = await rf.explain(run.id)  # both stopped cleanly: their heartbeats are gone
    assert after.workers == 0


async def test_a_step_between_attempts_is_in_backoff_until_its_next_one(env: Environment
                                                                        ) -> None:
    flow = rf.Reactor(unique("why_backoff"))
    calls = 0

    @flow.step(retries=rf.Retry(attempts=3, backoff=600.0, strategy="fixed"))
    async def flaky() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("upstream down")
        return calls

    run = await flow.dispatch()
    await env.drain()
    [blocker] = await rf.explain(run.id)
    _aware(blocker)
    assert (blocker.kind, blocker.step) == (rf.BlockerKind.BACKOFF, "flaky")
    assert blocker.until is not None and blocker.since is not None
    assert (blocker.until - blocker.since).total_seconds() == pytest.approx(600, abs=1)
    assert "ConnectionError" in blocker.detail and "attempt 2" in blocker.detail
    await env.clock.advance(600)
    await env.drain()
    assert (await flow.get(run.id)).status is rf.Status.COMPLETED


async def test_an_async_unit_out_names_the_execution_holding_it(env: Environment) -> None:
    flow = rf.Reactor(unique("why_unit"))
    entered, release = anyio.Event(), anyio.Event()

    @flow.async_step
    async def export() -> int:
        entered.set()
        await release.wait()
        return 1

    @flow.step
    async def after(export: int) -> int:
        return export

    run = await flow.dispatch()
    async with anyio.create_task_group() as tg:
        tg.start_soon(env.drain)
        await entered.wait()
        [blocker] = await _until(lambda: rf.explain(run.id))
        _aware(blocker)
        assert (blocker.kind, blocker.step) == (rf.BlockerKind.ASYNC_UNIT, "export")
        owner = await env.storage.lock_owner(f"{run.id}:export")
        assert owner is not None and owner in blocker.detail
        release.set()
    await env.drain()
    assert (await flow.get(run.id)).status is rf.Status.COMPLETED


async def test_a_held_run_waits_for_an_operator(env: Environment) -> None:
    flow = rf.Reactor(unique("why_held"), on_failure="hold")

    @flow.step
    async def charge() -> int:
        raise ValueError("card declined")

    run = await flow.run()
    assert run.status is rf.Status.HELD
    [blocker] = await rf.explain(run.id)
    _aware(blocker)
    assert (blocker.kind, blocker.step, blocker.until) == (rf.BlockerKind.HELD, "charge", None)
    assert "card declined" in blocker.detail


async def test_a_run_rolling_back_says_so(env: Environment) -> None:
    flow = rf.Reactor(unique("why_rollback"))
    undoing, release = anyio.Event(), anyio.Event()

    @flow.step
    async def reserve() -> int:
        return 1

    @reserve.undo
    async def unreserve(reserve: int) -> None:
        undoing.set()
        await release.wait()

    @flow.step
    async def charge(reserve: int) -> int:
        raise ValueError("card declined")

    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        await undoing.wait()
        found = await rf.explain((await rf.list_runs(reactor=flow.name)).runs[0].id)
        assert [b.kind for b in found] == [rf.BlockerKind.ROLLING_BACK]
        _aware(found[0])
        assert "failure" in found[0].detail
        release.set()


async def test_an_owner_that_holds_the_lock_but_does_not_move_is_stale(env: Environment
                                                                       ) -> None:
    flow = rf.Reactor(unique("why_owner"))
    entered, release = anyio.Event(), anyio.Event()

    @flow.step
    async def hang() -> int:
        entered.set()
        await release.wait()
        return 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        await entered.wait()
        run_id = (await rf.list_runs(reactor=flow.name)).runs[0].id
        assert await rf.explain(run_id) == []  # moving: its step is in flight
        await env.clock.advance(config.settings().stall_timeout + 1)
        [blocker] = await rf.explain(run_id)
        _aware(blocker)
        owner = await env.storage.lock_owner(run_id)
        assert blocker.kind is rf.BlockerKind.OWNER and owner is not None
        assert owner in blocker.detail and "stale" in blocker.detail
        release.set()


async def test_a_run_an_operator_paused_waits_for_resume(env: Environment) -> None:
    flow = rf.Reactor(unique("why_paused"))

    @flow.sleep
    async def nap() -> timedelta:
        return timedelta(hours=2)

    run = await flow.run()
    await flow.pause(run.id, reason="bad deploy", by="ops@example")
    [blocker] = await rf.explain(run.id)
    _aware(blocker)
    assert (blocker.kind, blocker.until) == (rf.BlockerKind.PAUSED, None)
    assert "ops@example" in blocker.detail and "bad deploy" in blocker.detail
    await flow.resume(run.id)
    assert [b.kind for b in await rf.explain(run.id)] == [rf.BlockerKind.SLEEP]
