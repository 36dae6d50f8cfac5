"""The fake clock drives the engine's waits: time moves only on `advance()`, and what is due
wakes then (asserted on the fake clock, never on the wall clock)."""

from __future__ import annotations

import anyio
import pytest

import reactorflow as rf
from reactorflow import clock
from reactorflow.testing import Environment, FakeClock, executed
from tests.helpers import unique

HOUR = 3600.0
DAY = 86_400.0


async def _collect(flow: rf.Reactor, into: list[rf.Run]) -> None:
    into.append(await flow.run())


async def _until_pending(env: Environment, *due: float) -> None:
    """Wait until exactly these waits are registered on the fake clock."""
    with anyio.fail_after(10):
        while env.clock.pending() != list(due):
            await anyio.sleep(0)


async def test_a_one_hour_backoff_parks_the_run_until_the_clock_passes_it(
        rf_env: Environment) -> None:
    """Longer than `park_after` (5 s): the run parks on its timer, holding nothing, and the
    clock's advance fires it (api.md §12)."""
    flow = rf.Reactor(unique("clock-backoff-parks"))
    calls: list[float] = []

    @flow.step(retries=rf.Retry(3, HOUR))
    async def flaky() -> int:
        calls.append(clock.now())
        if len(calls) == 1:
            raise OSError("the service is down")
        return 1

    start = rf_env.clock.now()
    run = await flow.run()
    assert run.status is rf.Status.RUNNING and run.steps["flaky"].attempts == 1
    assert await rf_env.storage.timer_of(run.id) == start + HOUR
    await rf_env.clock.advance(HOUR - 1)
    await rf_env.drain()
    assert len(calls) == 1  # not due yet
    await rf_env.clock.advance(1)
    await rf_env.drain()
    done = await flow.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.value == 1
    assert calls == [start, start + HOUR]


async def test_a_one_hour_backoff_under_park_after_sleeps_on_the_clock(
        rf_env: Environment) -> None:
    rf.configure(park_after=2 * HOUR)  # (the environment puts the settings back)
    flow = rf.Reactor(unique("clock-backoff"))
    calls: list[float] = []

    @flow.step(retries=rf.Retry(3, HOUR))
    async def flaky() -> int:
        calls.append(clock.now())
        if len(calls) == 1:
            raise OSError("the service is down")
        return 1

    @flow.step
    async def after(flaky: int) -> int:
        return flaky + 1

    start = rf_env.clock.now()
    result: list[rf.Run] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_collect, flow, result)
        await _until_pending(rf_env, start + HOUR)  # the backoff waits on the clock
        await rf_env.clock.advance(HOUR - 1)
        assert len(calls) == 1  # not due yet
        await rf_env.clock.advance(1)
    run = result[0]
    assert run.status is rf.Status.COMPLETED and run.value == 2
    assert calls == [start, start + HOUR]
    assert executed(run) == ["flaky", "after"]
    assert rf_env.clock.now() == start + HOUR


async def test_a_one_day_interrupt_timeout_expires_when_the_clock_passes_it(
        rf_env: Environment) -> None:
    flow = rf.Reactor(unique("clock-interrupt"))
    undone: list[str] = []

    @flow.step
    async def hold() -> str:
        return "seat"

    @hold.undo
    async def release(hold: str) -> None:
        undone.append(hold)

    @flow.interrupt(timeout=DAY)
    async def approve(payload: bool, hold: str) -> bool:
        return payload

    start = rf_env.clock.now()
    run = await flow.run()
    assert run.status is rf.Status.PAUSED and run.timeout_at == start + DAY
    await rf_env.clock.advance(DAY - 1)
    await rf.sweep_once()
    assert (await flow.get(run.id)).status is rf.Status.PAUSED
    await rf_env.clock.advance(1)
    await rf.sweep_once()
    run = await flow.get(run.id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InterruptExpired"
    assert undone == ["seat"]


async def test_a_step_timeout_fires_on_fake_time(rf_env: Environment) -> None:
    flow = rf.Reactor(unique("clock-timeout"))
    never = anyio.Event()

    @flow.step(timeout=30)
    async def slow() -> int:
        await never.wait()
        return 1

    start = rf_env.clock.now()
    result: list[rf.Run] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_collect, flow, result)
        await _until_pending(rf_env, start + 30)
        await rf_env.clock.advance(29)
        assert not result
        await rf_env.clock.advance(1)
    run = result[0]
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "StepTimeout"
    assert run.steps["slow"].finished_at == start + 30


async def test_advance_wakes_waits_in_due_order_and_never_goes_back() -> None:
    fake = FakeClock(start=1000.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await fake.sleep(seconds)
        woke.append((name, fake.now()))
        if name == "a":  # woken work that waits again inside the same advance
            await fake.sleep(5)
            woke.append(("a2", fake.now()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper, "b", 20)
        tg.start_soon(sleeper, "a", 10)
        tg.start_soon(sleeper, "c", 100)
        while len(fake.pending()) < 3:
            await anyio.sleep(0)
        await fake.advance(50)
        assert woke == [("a", 1010.0), ("a2", 1015.0), ("b", 1020.0)]
        assert fake.now() == 1050.0
        with pytest.raises(ValueError, match="never goes back"):
            await fake.advance(-1)
        with fake.move_on_after(30) as scope:
            await fake.advance(30)  # the scope's own deadline: cancelled at its next checkpoint
            await anyio.sleep(0)
        assert scope.cancelled_caught
        await fake.advance(50)
    assert woke[-1] == ("c", 1100.0)


async def test_leaving_the_environment_puts_the_real_clock_back() -> None:
    before = clock.current()
    async with Environment() as env:
        assert clock.current() is env.clock
    assert clock.current() is before
