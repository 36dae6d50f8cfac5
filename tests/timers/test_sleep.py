"""`@reactor.sleep`: a durable wait that parks the run holding nothing, and a timer that
resumes it at its deadline (api.md §12), on both backends under the fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

import reactorflow as rf
from reactorflow.testing import Environment


class Order(msgspec.Struct):
    order_id: str


flow = rf.Reactor("timers.reminder", inputs=Order)
seen: list[str] = []


@flow.step
async def ship(order_id: str) -> str:
    seen.append(f"ship {order_id}")
    return f"parcel-{order_id}"


@flow.sleep
async def cool_off(ship: str) -> timedelta:
    seen.append("cool_off")
    return timedelta(days=3)


@flow.step
async def audit(order_id: str) -> str:  # independent of the sleep: goes on while it sleeps
    seen.append("audit")
    return "ok"


@flow.step
async def remind(cool_off: datetime, order_id: str) -> str:
    seen.append(f"remind {cool_off.isoformat()}")
    return f"reminded {order_id}"


@pytest.fixture(params=["rf_env", "rf_redis_env"])
def env(request: pytest.FixtureRequest) -> Environment:
    seen.clear()
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


async def test_a_sleep_parks_the_run_and_wakes_it_at_its_deadline(env: Environment) -> None:
    begun = env.clock.now()
    run = await flow.run(order_id="A1")
    assert run.status is rf.Status.RUNNING
    sleep = run.steps["cool_off"]
    assert sleep.status is rf.StepStatus.WAITING
    assert sleep.wake_at == datetime.fromtimestamp(begun + 3 * 86_400, UTC)
    assert run.steps["audit"].status is rf.StepStatus.COMPLETED  # went on meanwhile
    assert run.steps["remind"].status is rf.StepStatus.PENDING
    assert run.waiting_on == []  # a sleep is never in waiting_on
    assert await env.storage.lock_owner(run.id) is None  # holds no lock

    await env.clock.advance(3 * 86_400 - 1)  # never early
    assert (await flow.get(run.id)).steps["cool_off"].status is rf.StepStatus.WAITING
    await env.clock.advance(1)
    await env.drain()
    done = await flow.get(run.id)
    assert done.status is rf.Status.COMPLETED
    assert done.steps["cool_off"].result == datetime.fromtimestamp(begun + 3 * 86_400, UTC)
    assert done.steps["cool_off"].wake_at is None
    assert seen.count("cool_off") == 1  # the body ran once: the deadline was checkpointed
    assert f"remind {datetime.fromtimestamp(begun + 3 * 86_400, UTC).isoformat()}" in seen
    assert await env.storage.timer_of(run.id) is None  # fired and disarmed
