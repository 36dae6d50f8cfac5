"""An interrupt's deadline settles the run (api.md §12, issue 25 item 3): `timeout=` takes a
`timedelta`; without `on_timeout` the run is rolled back to `failed` (`InterruptExpired`); with
`on_timeout=` (a payload, or a callable over the interrupt's other parameters) the interrupt is
resumed with that payload exactly once, as if `continue_` had delivered it, and a racing
`continue_` either wins or gets `rf.AlreadyResumed`.

The deadline is settled by `deadlines.deadline_due` (what the timer firer calls), here called
directly or through the sweeper (`rf.sweep_once`, `Environment.recover`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.runtime.engine.mode import WORKER
from reactorflow.runtime.ops.deadlines import deadline_due
from reactorflow.testing import Environment
from reactorflow.testing.clock import current_work
from tests.helpers import kinds, unique, until_past

pytestmark = pytest.mark.timeout(60)

DAY = 86_400.0
TIMED_OUT = {"approved": False, "by": "timeout"}


class Approval(msgspec.Struct):
    approved: bool
    by: str


class Order(msgspec.Struct):
    order_id: str
    amount: float = 10.0


class Part(msgspec.Struct):
    part_id: str


def _flow(log: list[str], *, timeout: Any = DAY, on_timeout: Any = None,
          resume: Literal["inline", "background"] = "inline",
          ran_in: list[str] | None = None) -> rf.Reactor:
    """prepare (with an undo) -> approve (the interrupt) -> ship; `ran_in` notes, for approve
    and ship, whether each ran in a job of the environment's queue (a worker) or not."""
    flow = rf.Reactor(unique("on-timeout"), inputs=Order)

    @flow.step
    async def prepare(order_id: str) -> str:
        log.append("prepare")
        return f"prep-{order_id}"

    @prepare.undo
    async def unprepare(result: str) -> None:
        log.append("undo prepare")

    given = {} if on_timeout is None else {"on_timeout": on_timeout}  # (the default: None)

    @flow.interrupt(timeout=timeout, resume=resume, **given)
    async def approve(payload: Approval, prepare: str, order_id: str) -> Approval:
        log.append(f"approve by {payload.by}")
        _where(ran_in)
        return payload

    @flow.step
    async def ship(approve: Approval, order_id: str) -> str:
        log.append("ship")
        _where(ran_in)
        return f"{order_id}: approved={approve.approved} by {approve.by}"

    return flow


def _where(ran_in: list[str] | None) -> None:
    if ran_in is not None:
        ran_in.append("worker" if current_work.get() is not None else "caller")


@pytest.fixture(params=["memory", "redis"])
def env(request: pytest.FixtureRequest) -> Environment:
    """The test kit's environment (fake clock) on memory and on Redis."""
    found: Environment = request.getfixturevalue(
        "rf_env" if request.param == "memory" else "rf_redis_env")
    return found



async def unfired(storage: rf.Storage, run: rf.Run) -> None:
    """Void the run's timer: the deadline is then noticed only by whoever calls
    `deadline_due` here, as the sweeper does when no firer ran (the timer's own firing is
    tested in tests/timers)."""
    await storage.disarm_timer(run.id)

def _resumes(run: rf.Run) -> int:
    return kinds(run).count("interrupt.resumed:approve")


# -- declaration ---------------------------------------------------------------------------------


def test_timeout_takes_a_timedelta_as_seconds() -> None:
    flow = _flow([], timeout=timedelta(days=2, minutes=30))
    options = flow.steps["approve"].interrupt
    assert options is not None and options.timeout == 2 * DAY + 1800.0
    assert options.on_timeout is None


@pytest.mark.parametrize("timeout", [timedelta(seconds=-5), timedelta(0), -1, 0])
def test_a_timeout_of_zero_or_less_is_refused_naming_the_step_and_value(timeout: Any) -> None:
    with pytest.raises(rf.DefinitionError, match=r"interrupt 'approve' of reactor 'on-timeout-"
                       r"[0-9a-f]+': timeout=.* must be seconds > 0") as info:
        _flow([], timeout=timeout)
    assert repr(timeout) in info.value.message
    assert info.value.step == "approve"


def test_an_on_timeout_payload_is_validated_at_declaration() -> None:
    flow = _flow([], on_timeout=TIMED_OUT)
    options = flow.steps["approve"].interrupt
    assert options is not None and options.on_timeout is not None
    assert options.on_timeout.payload == Approval(False, "timeout")  # conformed, as a payload
    assert options.on_timeout.compute is None


@pytest.mark.parametrize(("value", "says"), [
    ({"approved": "maybe", "by": "x"}, "approved: Expected `bool`, got `str`"),
    ({"approved": False}, "by: a required field is missing"),
    ({"approved": False, "by": "x", "why": "late"}, "why: an unknown field"),
    ("no", "Expected `object`, got `str`"),
])
def test_an_on_timeout_of_the_wrong_type_is_a_definition_error(value: Any, says: str) -> None:
    with pytest.raises(rf.DefinitionError) as info:
        _flow([], on_timeout=value)
    message = info.value.message
    assert "interrupt 'approve' of reactor 'on-timeout-" in message
    assert "on_timeout=" in message and "not a valid payload" in message and says in message
    assert info.value.step == "approve" and info.value.reactor is not None


def test_an_on_timeout_class_instead_of_a_value_is_refused() -> None:
    with pytest.raises(rf.DefinitionError, match=r"on_timeout=Approval is a class; give the "
                       r"payload itself"):
        _flow([], on_timeout=Approval)


@pytest.mark.parametrize("fn", [lambda nope: TIMED_OUT, lambda payload: payload,
                                lambda prepare, ship: TIMED_OUT])
def test_an_on_timeout_callable_takes_only_the_interrupts_other_parameters(
        fn: Callable[..., Any]) -> None:
    with pytest.raises(rf.DefinitionError) as info:
        _flow([], on_timeout=fn)
    message = info.value.message
    assert "interrupt 'approve' of reactor 'on-timeout-" in message
    assert "is not one of the step's arguments (prepare, order_id)" in message
    assert "never the payload itself" in message


def test_on_timeout_without_timeout_is_refused() -> None:
    with pytest.raises(rf.DefinitionError, match=r"interrupt 'approve' of reactor .*: on_timeout "
                       r"needs timeout="):
        _flow([], timeout=None, on_timeout=TIMED_OUT)


# -- at the deadline (fake clock, through the sweeper) -------------------------------------------


async def test_without_on_timeout_a_timedelta_deadline_fails_the_run(env: Environment) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=timedelta(days=1))
    start = env.clock.now()
    paused = await flow.run(order_id="A1")
    assert paused.status is rf.Status.PAUSED and paused.timeout_at == start + DAY
    await env.clock.advance(DAY)
    await rf.sweep_once()
    run = await flow.get(paused.id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InterruptExpired"
    assert run.error.step == "approve"
    assert log == ["prepare", "undo prepare"]
    with pytest.raises(rf.InterruptExpired):
        await flow.continue_(paused.id, step="approve", payload=TIMED_OUT)


async def test_an_on_timeout_payload_resumes_the_run_once_at_its_deadline(
        env: Environment) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=timedelta(days=2), on_timeout=Approval(False, "timeout"))
    paused = await flow.run(order_id="A2")
    await env.clock.advance(2 * DAY - 1)
    await rf.sweep_once()
    assert (await flow.get(paused.id)).status is rf.Status.PAUSED  # never early
    await env.clock.advance(1)
    await env.recover()  # the sweep settles the deadline
    run = await flow.get(paused.id)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == "A2: approved=False by timeout"
    assert run.steps["approve"].status == "completed"
    assert log == ["prepare", "approve by timeout", "ship"]
    assert _resumes(run) == 1
    with pytest.raises(rf.AlreadyResumed):
        await flow.continue_(paused.id, step="approve", payload={"approved": True, "by": "ann"})
    await rf.sweep_once()
    assert await deadline_due(flow, env.storage, paused.id) is None
    assert kinds(await flow.get(paused.id)) == kinds(run)  # nothing more happened


async def test_a_background_interrupt_is_resumed_by_a_worker(env: Environment) -> None:
    log: list[str] = []
    ran_in: list[str] = []
    flow = _flow(log, timeout=60, on_timeout=TIMED_OUT, resume="background", ran_in=ran_in)
    paused = await flow.run(order_id="A3")
    await unfired(env.storage, paused)
    await env.clock.advance(60)
    settled = await deadline_due(flow, env.storage, paused.id)
    assert settled is not None and settled.status is rf.Status.RUNNING  # handed to a worker
    await env.drain()
    run = await flow.get(paused.id)
    assert run.status is rf.Status.COMPLETED and run.value == "A3: approved=False by timeout"
    assert log == ["prepare", "approve by timeout", "ship"]
    assert ran_in == ["worker", "worker"]  # the payload and the rest ran in a job, not here
    assert _resumes(run) == 1


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_callable_on_timeout_reads_an_input_and_a_step(env: Environment,
                                                               asynchronous: bool) -> None:
    log: list[str] = []
    seen: list[tuple[str, str]] = []

    def decide(order_id: str, prepare: str) -> Approval:
        seen.append((order_id, prepare))
        return Approval(False, f"timer for {order_id} after {prepare}")

    async def decide_async(prepare: str, order_id: str) -> dict[str, Any]:
        return msgspec.to_builtins(decide(order_id, prepare))  # a mapping conforms too

    flow = _flow(log, timeout=timedelta(hours=1),
                 on_timeout=decide_async if asynchronous else decide)
    paused = await flow.run(order_id="A4")
    await env.clock.advance(3600)
    await rf.sweep_once()
    run = await flow.get(paused.id)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == "A4: approved=False by timer for A4 after prep-A4"
    assert seen == [("A4", "prep-A4")]  # called once, with the run's input and step result
    assert _resumes(run) == 1


async def test_an_invalid_callable_value_fails_the_run_naming_the_interrupt(
        env: Environment) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=60, on_timeout=lambda order_id: {"approved": "maybe",
                                                               "by": order_id})
    paused = await flow.run(order_id="A5")
    await env.clock.advance(60)
    await rf.sweep_once()
    run = await flow.get(paused.id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "PayloadValidationError"
    assert run.error.step == "approve"
    assert "interrupt 'approve'" in run.error.message and "on_timeout=" in run.error.message
    assert "approved: Expected `bool`, got `str`" in run.error.message
    assert log == ["prepare", "undo prepare"]  # rolled back; the interrupt's body never ran
    with pytest.raises(rf.AlreadyResumed):  # the deadline claimed it: no payload is accepted
        await flow.continue_(paused.id, step="approve", payload=TIMED_OUT)


async def test_a_raising_callable_fails_the_run_naming_the_interrupt(env: Environment) -> None:
    log: list[str] = []

    def decide(order_id: str) -> Approval:
        raise LookupError(f"no policy for {order_id}")

    flow = _flow(log, timeout=60, on_timeout=decide)
    paused = await flow.run(order_id="A6")
    await unfired(env.storage, paused)
    await env.clock.advance(60)
    settled = await deadline_due(flow, env.storage, paused.id)
    assert settled is not None and settled.status is rf.Status.FAILED
    assert settled.error is not None and settled.error.type == "ArgumentError"
    assert settled.error.message == ("interrupt 'approve': its on_timeout= raised LookupError: "
                                     "no policy for A6")
    assert log == ["prepare", "undo prepare"]


# -- continue_ and the deadline (real clock, real concurrency) -----------------------------------


async def test_continue_after_the_deadline_wins_while_nothing_claimed_it(
        storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=0.2, on_timeout=TIMED_OUT)
    paused = await flow.run(order_id="B1")
    await unfired(storage, paused)
    await until_past(paused.timeout_at)
    run = await flow.continue_(paused.id, step="approve", payload={"approved": True, "by": "ann"})
    assert run.status is rf.Status.COMPLETED and run.value == "B1: approved=True by ann"
    assert await deadline_due(flow, storage, paused.id) is None  # claimed: nothing to do
    assert log == ["prepare", "approve by ann", "ship"]


async def test_continue_after_the_deadline_fired_is_already_resumed(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=0.2, on_timeout=TIMED_OUT)
    paused = await flow.run(order_id="B2")
    await unfired(storage, paused)
    await until_past(paused.timeout_at)
    settled = await deadline_due(flow, storage, paused.id)
    assert settled is not None and settled.status is rf.Status.COMPLETED
    with pytest.raises(rf.AlreadyResumed):
        await flow.continue_(paused.id, step="approve", payload={"approved": True, "by": "ann"})
    assert log == ["prepare", "approve by timeout", "ship"]


async def test_the_deadline_is_never_settled_early(storage: rf.Storage) -> None:
    flow = _flow([], timeout=DAY, on_timeout=TIMED_OUT)
    paused = await flow.run(order_id="B3")
    assert await deadline_due(flow, storage, paused.id) is None
    assert (await flow.get(paused.id)).status is rf.Status.PAUSED


async def test_a_continue_racing_the_deadline_one_resume(storage: rf.Storage) -> None:
    """Both at once, for several runs: exactly one resume each; the loser gets
    `AlreadyResumed` (continue_) or None (the deadline)."""
    log: list[str] = []
    flow = _flow(log, timeout=0.3, on_timeout=TIMED_OUT)
    runs = [await flow.run(order_id=f"R{i}") for i in range(8)]
    for started in runs:
        await unfired(storage, started)
    await until_past(max(run.timeout_at or 0.0 for run in runs))
    outcomes: dict[str, list[str]] = {run.id: [] for run in runs}

    async def by_continue(run_id: str) -> None:
        try:
            await flow.continue_(run_id, step="approve", payload={"approved": True, "by": "ann"})
            outcomes[run_id].append("continue won")
        except rf.AlreadyResumed:
            outcomes[run_id].append("continue lost")

    async def by_deadline(run_id: str) -> None:
        settled = await deadline_due(flow, storage, run_id)
        outcomes[run_id].append("deadline lost" if settled is None else "deadline won")

    async with anyio.create_task_group() as tg:
        for index, run in enumerate(runs):  # either one first, in turn
            first, second = (by_continue, by_deadline)[::1 if index % 2 else -1]
            tg.start_soon(first, run.id)
            tg.start_soon(second, run.id)
    for run in runs:
        final = await flow.get(run.id)
        assert final.status is rf.Status.COMPLETED, final.error
        assert _resumes(final) == 1
        won = sorted(outcomes[run.id])
        assert won in (["continue won", "deadline lost"], ["continue lost", "deadline won"]), won
        by = "ann" if "continue won" in won else "timeout"
        assert final.value == f"{final.inputs.order_id}: approved={by == 'ann'} by {by}"
    assert log.count("ship") == len(runs)
    assert sum(line.startswith("approve by") for line in log) == len(runs)


async def test_five_concurrent_deadline_callers_resume_once(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=0.2, on_timeout=TIMED_OUT)
    paused = await flow.run(order_id="C1")
    await unfired(storage, paused)
    await until_past(paused.timeout_at)
    settled: list[rf.Run | None] = []

    async def fire() -> None:
        settled.append(await deadline_due(flow, storage, paused.id))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(fire)
    assert len([s for s in settled if s is not None]) == 1
    run = await flow.get(paused.id)
    assert run.status is rf.Status.COMPLETED and run.value == "C1: approved=False by timeout"
    assert _resumes(run) == 1
    assert log == ["prepare", "approve by timeout", "ship"]


async def test_five_concurrent_deadline_callers_fail_a_run_once(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=0.2)
    paused = await flow.run(order_id="C2")
    await unfired(storage, paused)
    await until_past(paused.timeout_at)

    async def fire() -> None:
        await deadline_due(flow, storage, paused.id)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(fire)
    run = await flow.get(paused.id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InterruptExpired"
    assert log == ["prepare", "undo prepare"]  # rolled back once
    assert kinds(run).count("run.failed") == 1


async def test_an_interrupt_in_a_composed_child_resumes_at_its_deadline(
        env: Environment) -> None:
    """The child's interrupt pauses the root; its `on_timeout` reads the child's own input and
    step, and the deadline resumes it by its path."""
    child = rf.Reactor(unique("on-timeout-child"), inputs=Part)

    @child.step
    async def pick(part_id: str) -> str:
        return f"bin-{part_id}"

    @child.interrupt(timeout=30,
                     on_timeout=lambda part_id, pick: Approval(True, f"{part_id}@{pick}"))
    async def inspect(payload: Approval, pick: str, part_id: str) -> Approval:
        return payload

    @child.step
    async def pack(inspect: Approval) -> str:
        return f"packed, inspected by {inspect.by}"

    root = rf.Reactor(unique("on-timeout-root"), inputs=Order)

    @root.compose(child)
    async def part(order_id: str) -> Part:
        return Part(part_id=f"{order_id}-1")

    paused = await root.run(order_id="N1")
    await unfired(env.storage, paused)
    assert paused.status is rf.Status.PAUSED and paused.waiting_on == [("part", "inspect")]
    await env.clock.advance(30)
    settled = await deadline_due(root, env.storage, paused.id)
    assert settled is not None and settled.status is rf.Status.COMPLETED, settled
    assert settled.value == "packed, inspected by N1-1@bin-N1-1"
    with pytest.raises(rf.AlreadyResumed):
        await root.continue_(paused.id, step=("part", "inspect"), payload=TIMED_OUT)


async def test_a_worker_settling_the_deadline_parks_the_run_at_a_long_backoff(
        env: Environment) -> None:
    """`mode=WORKER` (a worker's job settles the deadline): the remainder is driven as a worker
    drives it, so a retry backoff parks the run instead of holding the caller."""
    flow = rf.Reactor(unique("on-timeout-worker"))
    attempts: list[str] = []

    @flow.interrupt(timeout=60, on_timeout=TIMED_OUT)
    async def approve(payload: Approval) -> Approval:
        return payload

    @flow.step(retries=rf.Retry(attempts=2, backoff=600))
    async def notify(approve: Approval) -> str:
        attempts.append(approve.by)
        if len(attempts) == 1:
            raise OSError("the mail server is down")
        return f"told {approve.by}"

    paused = await flow.run()
    await unfired(env.storage, paused)
    await env.clock.advance(60)
    settled = await deadline_due(flow, env.storage, paused.id, mode=WORKER)
    assert settled is not None and settled.status is rf.Status.RUNNING  # parked, not held
    assert attempts == ["timeout"]
    await env.clock.advance(600)
    await env.drain()
    run = await flow.get(paused.id)
    assert run.status is rf.Status.COMPLETED and run.value == "told timeout"
    assert attempts == ["timeout", "timeout"]
