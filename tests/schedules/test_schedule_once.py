"""rf.schedule_once on both backends: one run per tick, catch-up policies, pause/resume,
refused inputs."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.runtime.services import scheduler
from tests.schedules.conftest import Clock


class Day(msgspec.Struct):
    day: str


def nightly(cron: str = "* * * * *", **options: Any) -> rf.Reactor:
    flow = rf.Reactor(f"sched-{uuid.uuid4().hex[:8]}", inputs=Day,
                      schedules=[rf.Schedule(cron, **options)])

    @flow.step
    async def report(day: str) -> str:
        return day

    return flow


def at_tick(tick: datetime) -> Day:
    return Day(day=tick.isoformat())


async def settle(flow: rf.Reactor, runs: list[rf.Run]) -> list[str]:
    """Wait for the dispatched runs; their `day` inputs, oldest tick first."""
    days = []
    for run in runs:
        done = await flow.wait(run.id, timeout=30)
        assert done.status == rf.Status.COMPLETED, done
        days.append(done.value)
    stored = await flow.list_runs(limit=1000)
    assert len(stored.runs) == len(runs)  # nothing else was started
    return sorted(days)


async def test_five_concurrent_schedulers_start_one_run_per_tick(
        storage: rf.Storage, clock: Clock) -> None:
    flow = nightly(catch_up="all", inputs=at_tick)
    assert await rf.schedule_once(reactors=[flow]) == []  # first seen: fires only for later ticks
    started: list[rf.Run] = []

    async def scheduler_pass() -> None:
        started.extend(await rf.schedule_once(reactors=[flow]))

    for minutes in (3, 2):
        clock.advance(minutes=minutes)
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(scheduler_pass)
    assert not any(run.replayed for run in started)
    assert await settle(flow, started) == [
        f"2026-01-01T00:0{m}:00+00:00" for m in range(1, 6)]


@pytest.mark.parametrize(("policy", "expected"), [
    ("latest", ["2026-01-01T05:00:00+00:00"]),
    ("all", [f"2026-01-01T0{h}:00:00+00:00" for h in range(1, 6)]),
    ("none", []),
])
async def test_catch_up_after_an_outage(storage: rf.Storage, clock: Clock, policy: str,
                                        expected: list[str]) -> None:
    flow = nightly("0 * * * *", catch_up=policy, inputs=at_tick)
    await rf.schedule_once(reactors=[flow])  # 00:00:30
    clock.advance(hours=5, minutes=10)  # no scheduler ran for five ticks
    missed = await rf.schedule_once(reactors=[flow])
    clock.advance(minutes=49, seconds=30.001)  # just past 06:00: fires, whatever the policy
    after = await rf.schedule_once(reactors=[flow])
    assert await settle(flow, missed + after) == [*expected, "2026-01-01T06:00:00+00:00"]


async def test_all_catches_up_at_most_the_most_recent_thousand_ticks(
        storage: rf.Storage, clock: Clock) -> None:
    flow = nightly(catch_up="all", inputs={"day": "d"})
    await rf.schedule_once(reactors=[flow])
    clock.advance(minutes=1010)
    started = await rf.schedule_once(reactors=[flow])
    assert len(started) == 1000
    key = f"{flow.name}:0"
    state = await storage.schedule_load(key, None)
    assert state is not None and state.last_run == started[-1].id
    for run in started:
        await flow.wait(run.id, timeout=30)


async def test_the_run_of_a_tick_has_the_contract_idempotency_key(
        storage: rf.Storage, clock: Clock) -> None:
    flow = nightly("0 * * * *", timezone="Europe/Madrid", inputs=Day(day="fixed"))
    await rf.schedule_once(reactors=[flow])
    clock.advance(hours=1)
    [run] = await rf.schedule_once(reactors=[flow])
    again = await flow.dispatch(Day(day="other"),
                                idempotency_key=f"schedule:{flow.name}:0:"
                                                "2026-01-01T02:00:00+01:00")
    assert again.replayed and again.id == run.id
    await flow.wait(run.id, timeout=30)


async def test_pause_skips_ticks_and_resume_fires_from_the_next_one(
        storage: rf.Storage, clock: Clock) -> None:
    flow = nightly(inputs=at_tick, catch_up="all")
    await rf.schedule_once(reactors=[flow])
    await scheduler.set_paused(flow.name, True)
    clock.advance(minutes=3)
    assert await rf.schedule_once(reactors=[flow]) == []
    state = await scheduler.state_of(scheduler.find(flow.name))
    assert state is not None and state.paused
    await scheduler.set_paused(f"{flow.name}:0", False)
    assert await rf.schedule_once(reactors=[flow]) == []  # the paused time's ticks never fire
    clock.advance(minutes=1)
    started = await rf.schedule_once(reactors=[flow])
    assert await settle(flow, started) == ["2026-01-01T00:04:00+00:00"]


@pytest.mark.parametrize("inputs", [
    lambda tick: {"day": 42},  # the wrong type
    lambda tick: {"nope": "x"},  # an unknown field
    lambda tick: 1 / 0,  # the callable raises
])
async def test_a_callable_returning_invalid_inputs_is_recorded_not_a_crash(
        storage: rf.Storage, clock: Clock, inputs: Callable[[datetime], Any]) -> None:
    flow = nightly(inputs=inputs)
    await rf.schedule_once(reactors=[flow])
    clock.advance(minutes=2)
    assert await rf.schedule_once(reactors=[flow]) == []
    state = await storage.schedule_load(f"{flow.name}:0", None)
    assert state is not None and state.error and state.last_run == ""
    assert (await flow.list_runs()).runs == []
    flow.schedules[0].inputs = at_tick  # fixed: the next tick starts its run
    clock.advance(minutes=1)
    started = await rf.schedule_once(reactors=[flow])
    assert await settle(flow, started) == ["2026-01-01T00:03:00+00:00"]
    state = await storage.schedule_load(f"{flow.name}:0", None)
    assert state is not None and state.error == "" and state.last_run == started[0].id


async def test_a_schedule_name_keys_its_state(storage: rf.Storage, clock: Clock) -> None:
    flow = nightly(name="every-minute", inputs=at_tick)
    await rf.schedule_once(reactors=[flow])
    assert await storage.schedule_load(f"{flow.name}:every-minute", None) is not None
    assert scheduler.find(f"{flow.name}:every-minute").label == "every-minute"
    with pytest.raises(rf.ReactorflowError, match="no schedule"):
        scheduler.find(f"{flow.name}:0")


class CountingStorage(rf.MemoryStorage):
    """A MemoryStorage that counts the calls of the storage contract's operations made on the
    test's own thread, `schedule_once`'s: not those of this process's timer firing loop, its
    worker heartbeat, or the local queue that runs the started run, each on a thread of its
    own on its own schedule (the started run's calls were counted when it ran before
    `schedule_once` returned: [7, 12] in CI)."""

    calls = 0

    def __getattribute__(self, name: str) -> Any:
        if (not name.startswith("_") and name in rf.Storage.__abstractmethods__
                and threading.current_thread() is threading.main_thread()):
            type(self).calls += 1
        return super().__getattribute__(name)


async def test_storage_operations_per_tick_do_not_grow_with_the_runs_stored(
        clock: Clock) -> None:
    counts = []
    for stored in (0, 200):
        storage = CountingStorage()
        rf.configure(storage=storage)
        flow = nightly(inputs=at_tick)
        for index in range(stored):
            await flow.run(Day(day=str(index)))
        await rf.schedule_once(reactors=[flow])
        clock.advance(minutes=1)
        CountingStorage.calls = 0
        [run] = await rf.schedule_once(reactors=[flow])
        counts.append(CountingStorage.calls)
        await flow.wait(run.id, timeout=30)
    assert counts[0] == counts[1] and 0 < counts[0] <= 8, counts


async def test_a_tick_whose_reactor_gate_is_busy_is_recorded_not_a_crash(
        storage: rf.Storage, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    """`dispatch` raises `rf.GateBusy` for a busy reactor gate: the tick is recorded with it
    (its last run still holds the lock, say) and the next tick starts its run."""
    flow = rf.Reactor(f"sched-{uuid.uuid4().hex[:8]}", inputs=Day,
                      schedules=[rf.Schedule("* * * * *", inputs=at_tick)],
                      gates=[rf.Lock(f"sched-lock-{uuid.uuid4().hex[:6]}")])

    @flow.step
    async def report(day: str) -> str:
        return day

    key = flow.gates[0].gate.key
    assert isinstance(key, str)
    await rf.schedule_once(reactors=[flow])
    await storage.gate_acquire(key, "last-run", limit=1, ttl=3600)
    clock.advance(minutes=2)
    with caplog.at_level("WARNING", logger="reactorflow.schedule"):
        assert await rf.schedule_once(reactors=[flow]) == []
    state = await storage.schedule_load(f"{flow.name}:0", None)
    assert state is not None and state.error.startswith("GateBusy:") and key in state.error
    assert "reactorflow.schedule.busy" in caplog.text
    await storage.gate_release(key, "last-run")
    clock.advance(minutes=1)
    started = await rf.schedule_once(reactors=[flow])
    assert await settle(flow, started) == ["2026-01-01T00:03:00+00:00"]


async def test_a_slow_claimer_and_the_scheduler_taking_its_tick_over_start_one_run(
        storage: rf.Storage, clock: Clock) -> None:
    """A claimer whose lease expired is not dead, only slow: the takeover starts the tick's
    run, and the claimer's own start, when it comes, finds that run (the idempotency key)."""
    flow = nightly(inputs=at_tick)
    await rf.schedule_once(reactors=[flow])
    clock.advance(minutes=1)  # 00:01:30: the 00:01 tick is due
    entry = scheduler.find(flow.name)
    state = await storage.schedule_load(entry.key, None)
    assert state is not None
    tick = datetime.fromisoformat("2026-01-01T00:01:00+00:00")
    tick_ms = round(tick.timestamp() * 1000)
    assert await storage.schedule_advance(entry.key, state.cursor, tick_ms,
                                          lease=round(clock.now() * 1000) + 1000)
    clock.advance(seconds=2)  # its lease expired
    [taken] = await rf.schedule_once(reactors=[flow])
    assert await scheduler._fire(storage, entry, tick) == []  # the slow claimer: a replay
    assert await settle(flow, [taken]) == ["2026-01-01T00:01:00+00:00"]
    state = await storage.schedule_load(entry.key, None)
    assert state is not None and state.pending == () and state.last_run == taken.id
