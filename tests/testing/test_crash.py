"""Crash injection: the process "dies" at a step boundary, storage is left as a kill leaves it,
and `recover()` finishes the run with every completed step executed exactly once (memory and
Redis)."""

from __future__ import annotations

from collections import Counter

import pytest

import reactorflow as rf
from reactorflow.testing import CrashNotReached, Environment, SimulatedCrash, executed
from tests.helpers import unique

STEPS = ["one", "two", "three", "four", "five"]


@pytest.fixture(params=["memory", "redis"])
def env(request: pytest.FixtureRequest) -> Environment:
    """The same test on memory and on Redis."""
    env: Environment = request.getfixturevalue(
        "rf_env" if request.param == "memory" else "rf_redis_env")
    return env


def five_steps(calls: Counter[str]) -> rf.Reactor:
    flow = rf.Reactor(unique("crash-five"))

    @flow.step
    async def one() -> int:
        calls["one"] += 1
        return 1

    @flow.step
    async def two(one: int) -> int:
        calls["two"] += 1
        return one + 1

    @flow.step
    async def three(two: int) -> int:
        calls["three"] += 1
        return two + 1

    @flow.step
    async def four(three: int) -> int:
        calls["four"] += 1
        return three + 1

    @flow.step
    async def five(four: int) -> int:
        calls["five"] += 1
        return four + 1

    return flow


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("when", ["before", "after"])
async def test_crash_and_recover_at_every_step_boundary(env: Environment, when: str, step: str
                                                        ) -> None:
    calls: Counter[str] = Counter()
    flow = five_steps(calls)
    with env.crash(flow, step, when=when) as point:  # type: ignore[arg-type]
        await flow.run()
    [run_id] = point.fired
    index = STEPS.index(step)
    done_before = STEPS[:index + 1] if when == "after" else STEPS[:index]
    assert calls == Counter(done_before)
    crashed = await flow.get(run_id)
    assert crashed.status is rf.Status.RUNNING  # nothing wrote "aborted": the process died
    assert [k for k, s in crashed.steps.items() if s.status == "completed"] == done_before
    assert await env.storage.lock_owner(run_id) is not None  # held until its TTL passes

    [run] = await env.recover()
    assert run.id == run_id and run.status is rf.Status.COMPLETED and run.value == 5
    assert calls == Counter(STEPS)  # every step executed exactly once
    assert executed(run) == STEPS


async def test_the_crash_surfaces_as_simulated_crash_inside_the_block(rf_env: Environment
                                                                      ) -> None:
    calls: Counter[str] = Counter()
    flow = five_steps(calls)
    seen: list[SimulatedCrash] = []
    with rf_env.crash(flow, "two", when="before"):
        try:
            await flow.run()
        except SimulatedCrash as crash:
            seen.append(crash)
            raise
    assert [(c.step, c.when) for c in seen] == [("two", "before")]
    run = await flow.run()  # the crash point is gone with its block
    assert run.ok


async def test_a_crash_point_no_run_reached_fails_the_block(rf_env: Environment) -> None:
    flow = five_steps(Counter())
    with pytest.raises(CrashNotReached, match="three"), rf_env.crash(flow, "three"):
        pass
    with pytest.raises(rf.ConfigurationError, match="when"), \
            rf_env.crash(flow, "three", when="during"):  # type: ignore[arg-type]
        pass
    with pytest.raises(rf.DefinitionError, match="no step 'six'"), rf_env.crash(flow, "six"):
        pass


async def test_a_crash_in_a_dispatched_run_and_recovery_in_a_worker(rf_env: Environment) -> None:
    calls: Counter[str] = Counter()
    flow = five_steps(calls)
    with rf_env.crash(flow, "three", when="after") as point:
        started = await flow.dispatch()
        await rf_env.drain()
    assert point.fired == [started.id]
    assert rf_env.queue.crashed and calls == Counter(STEPS[:3])
    [run] = await rf_env.recover()
    assert run.ok and calls == Counter(STEPS)
