"""`rf.testing.Environment`: overrides, drain, isolation, history helpers."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import reactorflow as rf
from reactorflow import clock, config
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.testing import DrainError, Environment, events, executed, undone
from tests.helpers import unique


class Order(msgspec.Struct):
    order_id: str
    amount: float


def checkout() -> tuple[rf.Reactor, list[str]]:
    flow = rf.Reactor(unique("tk-checkout"), inputs=Order)
    log: list[str] = []

    @flow.step
    async def reserve(order_id: str) -> str:
        log.append("reserve")
        return f"r-{order_id}"

    @reserve.undo
    async def unreserve(reserve: str) -> None:
        log.append("unreserve")

    @flow.step
    async def charge(reserve: str, amount: float) -> str:
        log.append("charge")
        return f"c-{amount:g}"

    @charge.undo
    async def refund(charge: str) -> None:
        log.append("refund")

    @flow.step
    async def ship(charge: str) -> str:
        log.append("ship")
        raise RuntimeError("no courier")

    return flow, log


async def test_override_replaces_a_step_body_within_the_block(rf_env: Environment) -> None:
    flow, log = checkout()
    del log

    async def fake_ship(charge: str) -> str:
        return "shipped"

    with rf_env.override(flow, "ship", fake_ship):
        run = await flow.run(order_id="A1", amount=10.0)
    assert run.ok and run.value == "shipped"
    assert executed(run) == ["reserve", "charge", "ship"]

    run = await flow.run(order_id="A2", amount=10.0)  # the declared body is back
    assert run.status is rf.Status.FAILED
    assert undone(run) == ["charge", "reserve"]
    assert [e.step for e in events(run, "step.failed")] == ["ship"]


async def test_override_checks_the_replacement_like_a_step(rf_env: Environment) -> None:
    flow, _ = checkout()

    def not_async(charge: str) -> str:
        return "x"

    async def other_params(amount: float) -> str:
        return "x"

    async def other_type(charge: str) -> int:
        return 1

    def refusal(step: str, fn: Any) -> str:
        with pytest.raises(rf.DefinitionError) as refused:
            rf_env.override(flow, step, fn).__enter__()
        return str(refused.value)

    assert "async" in refusal("ship", not_async)
    assert "parameters (amount) must be the step's (charge)" in refusal("ship", other_params)
    assert "declared to return" in refusal("ship", other_type)
    assert "no step 'pack'" in refusal("pack", other_type)


async def test_override_of_a_step_taking_the_context_names_the_missing_annotation(
        rf_env: Environment) -> None:
    flow = rf.Reactor(unique("tk-context"), inputs=Order)

    @flow.step
    async def charge(amount: float, ctx: rf.StepContext) -> str:
        return f"{ctx.idempotency_key}:{amount:g}"

    async def unannotated(amount: float, ctx) -> str:  # type: ignore[no-untyped-def]
        return "fake"

    async def mistyped(amount: float, ctx: str) -> str:
        return "fake"

    for fake, shown in ((unannotated, "no annotation"), (mistyped, "the annotation <class 'str'>")):
        with pytest.raises(rf.DefinitionError) as refused:
            rf_env.override(flow, "charge", fake).__enter__()
        message = str(refused.value)
        assert f"parameter 'ctx' receives the step context in the step, but the replacement " \
               f"gives it {shown}; annotate it `ctx: rf.StepContext`" in message
        assert "matches no input" not in message

    async def annotated(amount: float, ctx: rf.StepContext) -> str:
        return f"fake:{ctx.attempt}"

    with rf_env.override(flow, "charge", annotated):
        run = await flow.run(order_id="A1", amount=3.0)
    assert run.value == "fake:1"


async def test_drain_runs_dispatched_runs_to_idle(rf_env: Environment) -> None:
    flow = rf.Reactor(unique("tk-dispatch"))

    @flow.step
    async def one() -> int:
        return 1

    started = [await flow.dispatch() for _ in range(3)]
    await rf_env.drain()
    for run in started:
        assert (await flow.get(run.id)).ok
    assert [job.run_id for job in rf_env.queue.history] == [run.id for run in started]


async def test_drain_raises_when_work_keeps_arriving(rf_env: Environment) -> None:
    flow = rf.Reactor(unique("tk-forever"))

    @flow.step
    async def again() -> int:
        await flow.dispatch()  # every run starts another one
        return 1

    await flow.dispatch()
    with pytest.raises(DrainError, match="work keeps arriving"):
        await rf_env.drain(limit=20)


async def test_each_environment_is_isolated_and_restores_what_it_replaced() -> None:
    rf.configure(lock_ttl=30)
    settings, the_clock, factory = config.settings(), clock.current(), queue.register(None)
    queue.register(factory)
    flow = rf.Reactor(unique("tk-isolated"))

    @flow.step
    async def one() -> int:
        return 1

    async with Environment(lock_ttl=5) as first:
        run = await flow.run()
        assert config.settings().lock_ttl == 5
        assert config.current_storage() is first.storage
    async with Environment() as second:
        with pytest.raises(rf.RunNotFound):
            await flow.get(run.id)  # fresh storage
        assert second.storage is not first.storage
    assert config.settings() == settings and clock.current() is the_clock
    assert queue.register(factory) is factory
