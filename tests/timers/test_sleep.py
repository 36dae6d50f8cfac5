"""`@reactor.sleep`: a durable wait that parks the run holding nothing, and a timer that
resumes it at its deadline (api.md §12), on both backends under the fake clock."""

from __future__ import annotations

import math
import uuid
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


async def _on_a_whole_second(env: Environment) -> float:
    """Move the fake clock to a whole second (a deadline is kept to the microsecond)."""
    await env.clock.advance_to(math.ceil(env.clock.now()))
    return env.clock.now()


async def test_a_sleep_parks_the_run_and_wakes_it_at_its_deadline(env: Environment) -> None:
    begun = await _on_a_whole_second(env)
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


# -- what a sleep body may return -----------------------------------------------------------------

class Returns(msgspec.Struct):
    kind: str


picky = rf.Reactor("timers.picky", inputs=Returns)
AT = datetime(2031, 5, 1, 12, 0, tzinfo=UTC)


@picky.sleep
async def until(kind: str) -> object:
    return {"naive": datetime(2031, 5, 1, 12, 0), "negative": timedelta(seconds=-5),
            "text": "tomorrow", "bool": True, "aware": AT, "seconds": 90,
            "past": datetime(2001, 1, 1, tzinfo=UTC)}[kind]


@picky.step
async def then(until: datetime) -> str:
    return until.isoformat()


@pytest.mark.parametrize(("kind", "says"), [
    ("naive", "a naive datetime"), ("negative", "a negative duration"),
    ("text", "a str ('tomorrow')"), ("bool", "a bool (True)")])
async def test_a_bad_deadline_fails_the_step_naming_it_and_what_it_returned(
        env: Environment, kind: str, says: str) -> None:
    run = await picky.run(kind=kind)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InvalidSleep"
    assert run.error.step == "until" and says in run.error.message
    assert "sleep step 'until'" in run.error.message
    assert await env.storage.next_timer() is None  # nothing armed


async def test_an_aware_datetime_or_seconds_name_the_deadline(env: Environment) -> None:
    await _on_a_whole_second(env)
    run = await picky.run(kind="aware")
    assert run.steps["until"].wake_at == AT
    seconds = await picky.run(kind="seconds")
    assert seconds.steps["until"].wake_at == datetime.fromtimestamp(env.clock.now() + 90, UTC)
    await env.clock.advance(90)
    await env.drain()
    assert (await picky.get(seconds.id)).status is rf.Status.COMPLETED
    assert (await picky.get(run.id)).status is rf.Status.RUNNING  # 2031 is far off


async def test_a_deadline_in_the_past_completes_at_once(env: Environment) -> None:
    run = await picky.run(kind="past")
    assert run.status is rf.Status.COMPLETED
    assert run.value == "2001-01-01T00:00:00+00:00"


def test_a_sleep_in_a_map_element_reactor_is_a_definition_error() -> None:
    element = rf.Reactor("timers.element", inputs=Returns)

    @element.sleep
    async def wait(kind: str) -> float:
        return 1.0

    owner = rf.Reactor("timers.owner", inputs=Order)

    @owner.step
    async def items(order_id: str) -> list[Returns]:
        return []

    with pytest.raises(rf.DefinitionError, match=r"has a sleep \(timers\.element\.wait\)"):
        @owner.map_step(over="items", reactor=element)
        async def each(item: Returns) -> Returns:
            return item


def test_a_sleep_takes_no_retries_or_gates() -> None:
    flow_ = rf.Reactor("timers.options")
    with pytest.raises(rf.DefinitionError, match="sleep\\(\\) takes name, when and after"):
        flow_.sleep(retries=rf.Retry(attempts=2))  # type: ignore[call-overload]


# -- stopping a sleeping run ---------------------------------------------------------------------

async def test_cancel_acts_at_once_on_a_sleeping_run(env: Environment) -> None:
    run = await flow.run(order_id="C1")
    cancelled = await flow.cancel(run.id, reason="customer left")
    assert cancelled.status is rf.Status.CANCELLED
    assert cancelled.steps["cool_off"].status is rf.StepStatus.SKIPPED
    assert await env.storage.timer_of(run.id) is None  # void
    await env.clock.advance(4 * 86_400)
    await env.drain()
    assert (await flow.get(run.id)).steps["remind"].status is rf.StepStatus.PENDING


async def test_undo_acts_at_once_on_a_sleeping_run(env: Environment) -> None:
    undone_ship: list[str] = []
    undoable = rf.Reactor(f"timers.undoable.{id(env)}", inputs=Order)

    @undoable.step
    async def charge(order_id: str) -> str:
        return f"charge-{order_id}"

    @charge.undo
    async def refund(charge: str) -> None:
        undone_ship.append(charge)

    @undoable.sleep
    async def wait(charge: str) -> timedelta:
        return timedelta(hours=1)

    run = await undoable.run(order_id="U1")
    assert run.status is rf.Status.RUNNING
    undone = await undoable.undo(run.id)
    assert undone.status is rf.Status.CANCELLED
    assert undone_ship == ["charge-U1"]
    assert await env.storage.timer_of(run.id) is None


async def test_a_run_crashed_while_it_sleeps_is_recovered_and_wakes_once(
        env: Environment) -> None:
    with env.crash(flow, "cool_off", when="after"), pytest.raises(rf.testing.SimulatedCrash):
        await flow.run(order_id="K1")
    recovered = await env.recover()
    assert [r.steps["cool_off"].status for r in recovered] == [rf.StepStatus.WAITING]
    await env.clock.advance(3 * 86_400)
    await env.drain()
    done = await flow.get(recovered[0].id)
    assert done.status is rf.Status.COMPLETED
    assert seen.count("cool_off") == 1


# -- a sleep inside a composed child parks the root ------------------------------------------------

child = rf.Reactor("timers.child", inputs=Order)


@child.sleep
async def child_nap(order_id: str) -> timedelta:
    return timedelta(minutes=10)


@child.step
async def child_after(child_nap: datetime) -> str:
    return "child woke"


root = rf.Reactor("timers.root", inputs=Order)


@root.compose(child)
async def inner(order_id: str) -> Order:
    return Order(order_id=order_id)


@root.step
async def outer(inner: str) -> str:
    return f"root saw {inner}"


async def test_a_sleep_in_a_composed_child_parks_the_root(env: Environment) -> None:
    run = await root.run(order_id="R1")
    assert run.status is rf.Status.RUNNING
    assert run.steps["inner.child_nap"].status is rf.StepStatus.WAITING
    assert await env.storage.timer_of(run.id) is not None
    await env.clock.advance(600)
    await env.drain()
    done = await root.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.value == "root saw child woke"


# -- long backoffs park --------------------------------------------------------------------------

flaky = rf.Reactor("timers.flaky", inputs=Order)
tries: list[float] = []


@flaky.step(retries=rf.Retry(attempts=3, backoff=60.0, strategy="fixed"))
async def call_supplier(order_id: str) -> str:
    tries.append(1.0)
    if len(tries) < 3:
        raise ConnectionError("supplier down")
    return "ordered"


async def test_a_backoff_longer_than_park_after_parks_the_run_on_its_timer(
        env: Environment) -> None:
    tries.clear()
    run = await flaky.run(order_id="B1")
    assert run.status is rf.Status.RUNNING  # parked for its next attempt: nothing held
    assert len(tries) == 1 and await env.storage.lock_owner(run.id) is None
    assert await env.storage.timer_of(run.id) == pytest.approx(env.clock.now() + 60)
    await env.clock.advance(60)
    await env.drain()
    assert len(tries) == 2
    await env.clock.advance(60)
    await env.drain()
    done = await flaky.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.steps["call_supplier"].attempts == 3


async def test_park_after_must_be_positive_seconds() -> None:
    with pytest.raises(rf.ConfigurationError, match="park_after"):
        rf.configure(park_after=0)


# -- interrupt deadlines fire through the timers ---------------------------------------------------

class Approval(msgspec.Struct):
    approved: bool
    by: str


def approvals(on_timeout: Approval | None) -> rf.Reactor:
    approving = rf.Reactor(f"timers.approve.{on_timeout is not None}.{uuid.uuid4().hex[:6]}",
                           inputs=Order)
    options = {} if on_timeout is None else {"on_timeout": on_timeout}

    @approving.interrupt(timeout=timedelta(hours=48), **options)
    async def approve(payload: Approval, order_id: str) -> Approval:
        return payload

    @approving.step
    async def decide(approve: Approval) -> str:
        return f"approved={approve.approved} by {approve.by}"

    return approving


async def test_an_interrupt_deadline_fails_the_run_when_its_timer_fires(
        env: Environment) -> None:
    approving = approvals(None)
    run = await approving.run(order_id="D1")
    assert run.status is rf.Status.PAUSED
    assert await env.storage.timer_of(run.id) == pytest.approx(env.clock.now() + 48 * 3600)
    await env.clock.advance(48 * 3600)  # no sweep: the timer settles it
    await env.drain()
    failed = await approving.get(run.id)
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.type == "InterruptExpired"


async def test_an_on_timeout_payload_resumes_the_run_once_when_its_timer_fires(
        env: Environment) -> None:
    approving = approvals(Approval(approved=False, by="timeout"))
    run = await approving.run(order_id="D2")
    await env.clock.advance(48 * 3600)
    await env.drain()
    done = await approving.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.value == "approved=False by timeout"
    with pytest.raises(rf.AlreadyResumed):  # a late continue_ loses to the timer
        await approving.continue_(run.id, step="approve",
                                  payload={"approved": True, "by": "ann"})


# -- an async unit's long backoff parks the unit, not a worker ------------------------------------

unit_flow = rf.Reactor("timers.unit_backoff", inputs=Order)
unit_tries: list[int] = []


@unit_flow.async_step(retries=rf.Retry(attempts=3, backoff=60.0, strategy="fixed"))
async def supplier(order_id: str) -> str:
    unit_tries.append(1)
    if len(unit_tries) < 3:
        raise ConnectionError("supplier down")
    return f"ordered {order_id}"


@unit_flow.step
async def confirm(supplier: str) -> str:
    return f"confirmed: {supplier}"


async def test_an_async_units_long_backoff_parks_it_between_attempts(env: Environment) -> None:
    rf.configure(async_wait_timeout=600)  # its reader waits through the two backoffs
    unit_tries.clear()
    run = await unit_flow.dispatch(order_id="U7")  # in a worker: the run parks on its unit
    await env.drain()  # the first attempt fails; the unit parks: no job waits for the clock
    parked = await unit_flow.get(run.id)
    assert parked.steps["supplier"].status is rf.StepStatus.RUNNING
    assert parked.steps["supplier"].attempts == 1 and len(unit_tries) == 1
    await env.clock.advance(60)
    await env.drain()
    assert len(unit_tries) == 2 and (await unit_flow.get(run.id)).steps["supplier"].attempts == 2
    await env.clock.advance(60)
    await env.drain()
    done = await unit_flow.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.value == "confirmed: ordered U7"
    assert done.steps["supplier"].attempts == 3 and len(unit_tries) == 3
