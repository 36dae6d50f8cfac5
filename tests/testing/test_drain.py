"""`drain()` and `clock.advance()` always end (issue 22, item 11): they return when the jobs are
done, or `drain()` raises `DrainStuck` naming each job still running and what it waits for on
the fake clock. Driven by the shop app (`tests.workflows.shop`) on both lanes."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from reactorflow.testing import DrainStuck, Environment
from tests.helpers import unique
from tests.workflows import shop

pytestmark = pytest.mark.timeout(30)  # a hang fails the test instead of blocking the suite

ADA = {"order_id": "A1", "customer": "ada", "amount": 10.0, "items": ["pen", "ink", "pad"]}


@pytest.fixture(params=["memory", "redis"])
def env(request: pytest.FixtureRequest) -> Environment:
    return request.getfixturevalue("rf_env" if request.param == "memory" else "rf_redis_env")


async def test_the_shop_runs_to_the_end_and_drain_returns(env: Environment) -> None:
    shop.TRAIL.clear()
    run = await shop.checkout.run(**ADA)
    assert run.status is rf.Status.RUNNING  # handed off after charge
    await env.drain()
    run = await shop.checkout.get(run.id)
    assert run.status is rf.Status.PAUSED and run.steps["approve"].status == "waiting"
    run = await shop.checkout.continue_(run.id, step="approve",
                                        payload={"approved": True, "by": "grace"})
    await env.drain()
    run = await shop.checkout.get(run.id)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == "A1: 3 label(s), courier for A1 to 1 Harbour Street"
    assert run.steps["ship.book_courier"].status == "completed"
    assert run.steps["email"].status == "completed"  # the fire-and-forget unit ran too
    await env.clock.advance(1)  # used to hang: a job still slept on the fake clock
    await env.drain()
    # the nightly schedule fires on the same fake clock (the first pass starts its cursor)
    await rf.schedule_once(reactors=[shop.nightly])
    await env.clock.advance(86_400)
    [nightly] = await rf.schedule_once(reactors=[shop.nightly])
    await env.drain()
    assert (await shop.nightly.get(nightly.id)).value == "nightly report"


class Items(msgspec.Struct):
    items: list[str]


fleet = rf.Reactor("tests.drain.fleet", inputs=Items)


@fleet.map_step(over="items", fan_out=True, batch_size=2)
async def pack(item: str) -> str:
    return item.upper()


async def test_a_fanned_out_map_returns_running_and_drains_on_both_lanes(
        env: Environment) -> None:
    """The caller gets the run `running` at the map on every lane (on Redis the elements ran
    while the owner was still writing: it returned `completed` at times), and drain finishes it
    (on Redis the resume job used to back off on the fake clock for the owner's lock: a hang)."""
    for n in range(5):
        run = await fleet.run(items=[f"a{n}", "b", "c"])
        assert run.status is rf.Status.RUNNING, run.status
        await env.drain()
        done = await fleet.get(run.id)
        assert done.status is rf.Status.COMPLETED and done.value == [f"A{n}", "B", "C"]


async def test_an_async_step_in_retry_backoff_does_not_deadlock_the_clock(
        rf_env: Environment) -> None:
    """The unit's job sleeps 4 fake seconds between attempts (under `park_after`: a longer
    backoff parks the unit and holds no job): drain names it, and `clock.advance` wakes it (it
    used to wait for the queue to go idle: a deadlock)."""
    flow = rf.Reactor(unique("drain-mail"))
    attempts: list[int] = []

    @flow.step
    async def order() -> str:
        return "o1"

    @flow.async_step(retries=rf.Retry(attempts=2, backoff=4, jitter=False))
    async def mail(order: str, ctx: rf.StepContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("smtp down")
        return "mailed"

    run = await flow.run()
    assert run.status is rf.Status.COMPLETED  # the unit is fire-and-forget
    with pytest.raises(DrainStuck) as stuck:
        await rf_env.drain()
    [(job, why)] = stuck.value.waiting.items()
    assert job.startswith(f"unit:{flow.name}:{run.id}:mail")
    assert why == ["retry backoff of step 'mail' (attempt 2 of 2): since 0s ago, due in 4s"]
    assert f"job unit:{flow.name}:{run.id}:mail waits for retry backoff" in str(stuck.value)
    assert "env.clock.advance" in str(stuck.value)
    await rf_env.clock.advance(4)
    await rf_env.drain()
    assert attempts == [1, 2]
    assert (await flow.get(run.id)).steps["mail"].status == "completed"
