"""Crash injection for schedules: a scheduler that "dies" between claiming a tick and starting
its run leaves the tick pending under a lease; after the lease, the next pass of any scheduler
starts exactly one run for it (memory and Redis)."""

from __future__ import annotations

from datetime import datetime

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.testing import CrashNotReached, Environment
from tests.helpers import unique


class Tick(msgspec.Struct):
    at: str


@pytest.fixture(params=["memory", "redis"])
def env(request: pytest.FixtureRequest) -> Environment:
    """The same test on memory and on Redis."""
    env: Environment = request.getfixturevalue(
        "rf_env" if request.param == "memory" else "rf_redis_env")
    return env


def minutely() -> rf.Reactor:
    flow = rf.Reactor(unique("crash-tick"), inputs=Tick, schedules=[
        rf.Schedule("* * * * *", inputs=lambda tick: Tick(at=tick.isoformat()))])

    @flow.step
    async def note(at: str) -> str:
        return at

    return flow


async def tick_of(flow: rf.Reactor, run_id: str) -> int:
    """The tick (ms) the run was started for."""
    at = (await flow.get(run_id)).inputs.at
    return round(datetime.fromisoformat(at).timestamp() * 1000)


async def ticks_run(env: Environment, flow: rf.Reactor) -> list[int]:
    """The tick of every run of `flow` stored (one entry per run)."""
    await env.drain()
    page = await flow.list_runs(limit=100)
    return sorted([await tick_of(flow, run.id) for run in page.runs])


async def test_a_scheduler_dying_after_its_claim_leaves_the_tick_to_the_next_pass(
        env: Environment) -> None:
    flow = minutely()
    assert await rf.schedule_once(reactors=[flow]) == []  # first seen
    await env.clock.advance(60)
    with env.crash_tick(flow) as point:
        await rf.schedule_once(reactors=[flow])
    [claimed] = point.fired
    assert await ticks_run(env, flow) == []  # it died before starting the run
    state = await env.storage.schedule_load(f"{flow.name}:0", None)
    assert state is not None and [t for t, _ in state.pending] == [claimed]
    assert await rf.schedule_once(reactors=[flow]) == []  # the lease holds: not yet taken over

    await env.clock.advance(config.settings().lock_ttl + 1)
    started: list[rf.Run] = []

    async def scheduler_pass() -> None:
        started.extend(await rf.schedule_once(reactors=[flow]))

    async with anyio.create_task_group() as tg:  # five schedulers find the lapsed tick at once
        for _ in range(5):
            tg.start_soon(scheduler_pass)
    runs = await ticks_run(env, flow)
    assert runs.count(claimed) == 1  # exactly one run for the claimed tick
    # ... and one per tick for any tick that came due meanwhile, each started once
    assert len(runs) == len(set(runs)) == len(started)
    state = await env.storage.schedule_load(f"{flow.name}:0", None)
    assert state is not None and state.pending == ()
    assert state.last_run in {run.id for run in started}


async def test_crash_tick_raises_when_no_pass_claimed_a_tick(env: Environment) -> None:
    flow = minutely()
    with pytest.raises(CrashNotReached, match="no scheduler pass claimed"), env.crash_tick(flow):
        await rf.schedule_once(reactors=[flow])  # first seen: nothing claimed
