"""The StubBroker lane: background work on the embedded in-process Dramatiq worker, on both
storage backends (api.md §2 and §4; seeds 001-background-async-steps and 010 worker protocol)."""

from __future__ import annotations

import functools
import logging
import os
from typing import Annotated

import anyio
import pytest
from dramatiq.brokers.stub import StubBroker

import reactorflow as rf
from reactorflow.workers.broker import QUEUE, actors_for, current_broker, send
from tests.helpers import kinds, redeploy, unique
from tests.workers.conftest import Lane
from tests.workers.test_unknown_reactor import paused_flow
from tests.workflows import background as bg

pytestmark = pytest.mark.usefixtures("storage")


async def test_dispatch_returns_running_and_a_worker_completes(lane: Lane) -> None:
    run = await bg.dispatched.dispatch()
    assert run.status is rf.Status.RUNNING
    done = await bg.dispatched.wait(run.id, timeout=10)
    assert done.status is rf.Status.COMPLETED and done.value == 42
    assert lane.notes() == ["only"]


async def test_always_dispatch_makes_run_hand_over(lane: Lane) -> None:
    run = await bg.always.run()
    assert run.status is rf.Status.RUNNING
    assert (await bg.always.wait(run.id, timeout=10)).value == "done"


async def test_dispatch_validates_inputs_in_the_caller(lane: Lane) -> None:
    before = len((await bg.units.list_runs(limit=1000)).runs)
    with pytest.raises(rf.InputValidationError) as info:
        await bg.units.dispatch(order_id=3)
    assert info.value.field == "order_id"
    assert len((await bg.units.list_runs(limit=1000)).runs) == before  # nothing stored


async def test_background_after_hands_off_the_rest(lane: Lane) -> None:
    run = await bg.handoff.run()
    assert run.status is rf.Status.RUNNING
    assert run.steps["h1"].status == "completed"
    assert run.steps["h2"].status == "pending"
    done = await bg.handoff.wait(run.id, timeout=10)
    assert done.value == "h1h2h3"
    assert lane.notes() == ["h1", "h2", "h3"]  # nothing ran twice: the hand-off never re-fires
    assert kinds(done).count("run.handed_off") == 1


async def test_background_before_leaves_its_step_to_the_worker(lane: Lane) -> None:
    run = await bg.before.run()
    assert run.status is rf.Status.RUNNING
    assert run.steps["b2"].status == "pending"
    done = await bg.before.wait(run.id, timeout=10)
    assert done.value == "b1b2"
    assert lane.notes() == ["b1", "b2"]


async def test_hand_off_never_reached_finishes_in_the_caller(lane: Lane) -> None:
    run = await bg.never_reached.run(skip=True)
    assert run.status is rf.Status.COMPLETED
    assert run.value == "tail after skipped"
    assert "run.handed_off" not in kinds(run)


async def test_async_step_value_reaches_its_reader(lane: Lane) -> None:
    run = await bg.units.run(order_id="U1")
    assert run.status is rf.Status.COMPLETED
    assert run.steps["send_email"].status == "completed"
    strict = [s for s in lane.notes() if s.startswith("strict")]
    assert strict == ["strict read mail:U1"]  # the unit's value, as its reader received it
    assert "async.dispatched:send_email" in kinds(run)


async def test_siblings_do_not_wait_for_an_async_step(lane: Lane) -> None:
    flow = rf.Reactor(unique("siblings"))
    seen: list[str] = []

    @flow.async_step
    async def slow_unit() -> str:
        await bg.wait_for_gate("unit")
        return "unit"

    @flow.step
    async def independent() -> str:
        seen.append("independent ran")
        return "i"

    @flow.step
    async def opener(independent: str) -> str:
        await anyio.Path(os.environ[bg.GATE_ENV], "unit").touch()
        return "opened"

    @flow.step
    async def reader(slow_unit: str, opener: str) -> str:
        return slow_unit + "/" + opener

    with anyio.fail_after(20):
        run = await flow.run()
    # the unit could only finish after `opener`, which ran while the unit was in flight
    assert run.value == "unit/opened"
    assert seen == ["independent ran"]


async def test_failed_unit_fails_a_plain_reader_and_compensates_itself_once(lane: Lane) -> None:
    run = await bg.units.run(order_id="U2", fail=True)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "strict"
    assert run.error.type == "AsyncUnitFailed"
    assert "smtp down" in run.error.message
    notes = lane.notes()
    assert notes.count("send_email attempt 1") == 1 and notes.count("send_email attempt 2") == 1
    assert notes.count("unsend ConnectionError") == 1  # once, after its last attempt
    assert "tolerant ok=False" in notes  # an rf.Outcome reader gets the failure as a value
    assert "undo sibling" in notes  # the parent rolled back its own steps...
    assert run.steps["send_email"].status == "failed"  # ...never the unit


async def test_reader_timeout_fails_the_reading_step(lane: Lane) -> None:
    rf.configure(async_wait_timeout=0.3)
    run = await bg.units.run(order_id="U3", gate="never-opened")
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "AsyncWaitTimeout"
    assert "async_wait_timeout" in run.error.message
    lane.open_gate("never-opened")  # let the unit finish so it does not outlive the test


async def test_run_may_finish_before_its_fire_and_forget_unit(lane: Lane) -> None:
    run = await bg.fire_and_forget.run(order_id="F1", gate="mail")
    assert run.status is rf.Status.COMPLETED
    assert run.steps["background_mail"].status == "running"
    lane.open_gate("mail")
    with anyio.fail_after(10):
        while (await bg.fire_and_forget.get(run.id)).steps["background_mail"].status \
                != "completed":
            await anyio.sleep(0.02)
    assert lane.notes().count("background_mail") == 1


async def test_async_reactor_child_is_linked_and_never_rolled_back(lane: Lane) -> None:
    ok = await bg.parent.run(n=2)
    assert ok.status is rf.Status.COMPLETED
    assert ok.value == "child ok=True value=20"
    failing = await bg.parent.run(n=3, parent_fails=True)
    assert failing.status is rf.Status.FAILED
    child_id = f"{failing.id}-spawn"
    child_run = await bg.child.get(child_id)
    assert child_run.status is rf.Status.COMPLETED  # not compensated by the parent
    assert "undo grow" not in lane.notes()


async def test_async_reactor_failure_reaches_an_outcome_reader(lane: Lane) -> None:
    run = await bg.parent.run(n=1, child_fails=True)
    assert run.status is rf.Status.COMPLETED
    assert run.value == "child ok=False value=None"


async def test_async_reactor_inputs_are_validated_at_dispatch(lane: Lane) -> None:
    flow = rf.Reactor(unique("badchild"))

    @flow.async_reactor(bg.child)
    async def spawn() -> dict[str, object]:
        return {"n": "ten"}

    @flow.step
    async def after(spawn: rf.Outcome[int]) -> str:
        return "never"

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InputValidationError"


async def test_resume_background_validates_here_and_runs_in_a_worker(lane: Lane) -> None:
    paused = await bg.late.run()
    assert paused.status is rf.Status.PAUSED
    with pytest.raises(rf.PayloadValidationError):
        await bg.late.continue_(paused.id, step="approve", payload={"ok": "yes"})
    handed = await bg.late.continue_(paused.id, step="approve", payload={"ok": True})
    assert handed.status is rf.Status.RUNNING
    done = await bg.late.wait(paused.id, timeout=10)
    assert done.value == "approved=True"
    assert lane.notes() == ["before_pause", "approve", "after_pause"]


async def _processed(broker: StubBroker) -> None:
    """Until the embedded worker has processed (acknowledged) every message of the queue;
    raises if any was dead-lettered."""
    await anyio.to_thread.run_sync(
        functools.partial(broker.join, QUEUE, timeout=30_000, fail_fast=True))


async def test_stray_and_duplicate_worker_messages_do_nothing(
        lane: Lane, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="reactorflow.worker")
    done = await bg.dispatched.run()
    paused = await bg.late.run()
    broker = current_broker()
    assert isinstance(broker, StubBroker)
    actor = actors_for(broker).execute_run
    for run_id, name in ((done.id, bg.dispatched.name), (paused.id, bg.late.name),
                         ("no-such-run", bg.dispatched.name)):
        for _ in range(3):
            send(actor.message(run_id, name, 0), broker, None)
    await _processed(broker)  # every message was taken, processed and acknowledged
    strays = [r for r in caplog.records if "reactorflow.worker.stray" in r.getMessage()]
    assert len(strays) == 3 and all("no-such-run" in r.getMessage() for r in strays)
    assert (await bg.dispatched.get(done.id)).history == done.history
    assert (await bg.late.get(paused.id)).history == paused.history
    assert lane.notes() == ["only", "before_pause"]


async def test_duplicate_dispatch_messages_run_each_step_once(lane: Lane) -> None:
    run = await bg.handoff.run()
    broker = current_broker()
    actor = actors_for(broker).execute_run
    for _ in range(4):
        send(actor.message(run.id, bg.handoff.name, 0), broker, None)
    done = await bg.handoff.wait(run.id, timeout=15)
    assert done.status is rf.Status.COMPLETED
    assert isinstance(broker, StubBroker)
    await _processed(broker)  # the duplicates too
    assert lane.notes() == ["h1", "h2", "h3"]
    assert (await bg.handoff.get(run.id)).history == done.history


def test_background_definition_errors() -> None:
    flow = rf.Reactor(unique("bgdef"))

    @flow.step
    async def one() -> int:
        return 1

    @flow.interrupt
    async def wait_here(payload: int) -> int:
        return payload

    with pytest.raises(rf.DefinitionError, match="exactly one of"):
        flow.background()
    with pytest.raises(rf.DefinitionError, match="exactly one of"):
        flow.background(after="one", before="one")
    with pytest.raises(rf.DefinitionError, match="not a step declared"):
        flow.background(after="ghost")
    with pytest.raises(rf.DefinitionError, match="resume='background'"):
        flow.background(before="wait_here")
    flow.background(after="one")
    with pytest.raises(rf.DefinitionError, match="already declared"):
        flow.background(before="one")
    eager = rf.Reactor(unique("eager"), always_dispatch=True)

    @eager.step
    async def only() -> int:
        return 1

    with pytest.raises(rf.DefinitionError, match="always_dispatch"):
        eager.background(after="only")


def test_async_unit_definition_errors() -> None:
    flow = rf.Reactor(unique("unitdef"))

    @flow.async_step
    async def unit() -> int:
        return 1

    with pytest.raises(rf.DefinitionError, match="never undoes an async unit"):
        @unit.undo
        async def undo_unit(result: int) -> None:
            pass

    @flow.step
    async def plain() -> int:
        return 2

    with pytest.raises(rf.DefinitionError, match="not an async_step or async_reactor"):
        @flow.step
        async def wrong(plain: rf.Outcome[int]) -> int:
            return 0

    with pytest.raises(rf.DefinitionError, match="never retried as a whole"):
        flow.async_reactor(bg.child, retries=rf.Retry(2))


async def test_exhausted_job_retries_fail_the_run_and_publish(lane: Lane) -> None:
    """Dramatiq gives up on a job after infrastructure errors: the run is failed with the
    reason, and its completion is published (waiters wake at once)."""
    from reactorflow import config
    from reactorflow.workers import jobs

    paused = await bg.late.run()
    message = {"actor_name": "reactorflow.execute_run", "args": [paused.id, bg.late.name, 0],
               "options": {"traceback": "Traceback...\nStorageConnectionError: redis down"}}
    async with config.current_storage().subscribe(paused.id) as subscription:
        await jobs.retries_exhausted(message, {"retries": 3, "max_retries": 3})
        assert await subscription.wait(5)
    failed = await bg.late.get(paused.id)
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.type == "JobRetriesExhausted"
    assert "3 time(s)" in failed.error.message and "redis down" in failed.error.message


async def test_unknown_reactor_in_a_worker_fails_the_run_once(lane: Lane) -> None:
    from reactorflow.workers import jobs

    flow = paused_flow()  # its run's stored reactor is not declared in this worker
    paused = await flow.run()
    redeploy(flow)
    with pytest.raises(jobs.PermanentFailure, match="not declared in this worker"):
        await jobs.execute_run(paused.id, flow.name)
    failed = await flow.get(paused.id)
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.type == "UnknownReactor"


async def test_hand_off_after_an_async_step_and_a_path_into_its_result(lane: Lane) -> None:
    flow = rf.Reactor(unique("unit-handoff"))

    @flow.async_step
    async def lookup() -> dict[str, str]:
        return {"city": "Leith", "country": "Scotland"}

    @flow.step
    async def label(city: Annotated[str, rf.Result("lookup", "city")]) -> str:
        return f"ships to {city}"

    flow.background(after="lookup")
    run = await flow.run()
    assert run.status is rf.Status.RUNNING  # handed off once the unit was dispatched
    done = await flow.wait(run.id, timeout=10)
    assert done.value == "ships to Leith"


def test_returns_naming_an_async_unit_fails_at_its_decorator() -> None:
    flow = rf.Reactor(unique("returns-unit"), returns="mail")
    with pytest.raises(rf.DefinitionError, match="returns='mail'"):
        @flow.async_step
        async def mail() -> str:
            return "sent"


async def test_a_run_with_an_async_step_returns_exactly_what_storage_holds(lane: Lane) -> None:
    """The unit's worker appends events of its own: the returned snapshot has them too."""
    run = await bg.units.run(order_id="U3")
    assert run.status is rf.Status.COMPLETED
    assert run == await bg.units.get(run.id)
