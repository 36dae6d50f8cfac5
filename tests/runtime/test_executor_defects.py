"""Regression tests of the forward executor's defects (issue 8, items 3, 13, 24 and 25), on
both storage backends."""

from __future__ import annotations

import asyncio

import anyio
import msgspec
import pytest

import reactorflow as rf
from tests.helpers import kinds, unique

pytestmark = pytest.mark.usefixtures("storage")


class Approval(msgspec.Struct):
    approved: bool


def _saga(name: str) -> tuple[rf.Reactor, list[str]]:
    """A reactor whose first step notes its undo (so a test can see the rollback)."""
    log: list[str] = []
    flow = rf.Reactor(unique(name))

    @flow.step
    async def prepare() -> str:
        log.append("prepare")
        return "prepared"

    @prepare.undo
    async def unprepare(result: str) -> None:
        log.append("undo prepare")

    return flow, log


# -- item 3: a claimed payload that no longer decodes ---------------------------------------------


async def test_an_unreadable_claimed_payload_fails_its_step_with_rollback(
        storage: rf.Storage) -> None:
    flow, log = _saga("defect3")

    @flow.interrupt
    async def approve(payload: Approval, prepare: str) -> bool:
        log.append("approve")
        return payload.approved

    paused = await flow.run()
    assert paused.status is rf.Status.PAUSED
    # a claim whose bytes the interrupt's schema cannot read (as after a schema change)
    assert await storage.claim(paused.id, "approve", b"\xc1") is not None
    report = await rf.sweep_once()  # a claimed payload with no resumer: the sweeper applies it
    assert paused.id in report.recovered
    run = await flow.get(paused.id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "approve"
    assert run.error.type == "SerializationError"
    assert run.steps["approve"].status is rf.StepStatus.FAILED  # checkpointed, not "waiting"
    assert "step.failed:approve" in kinds(run)
    assert log == ["prepare", "undo prepare"]


# -- item 13: a CancelledError raised by step code ------------------------------------------------


async def _cancelled_by_someone_else() -> None:
    """Await a task that another party cancelled: raises CancelledError, though nobody cancelled
    the awaiting task."""
    task = asyncio.ensure_future(asyncio.sleep(30))
    await asyncio.sleep(0)
    task.cancel()
    await task


async def test_a_cancelled_error_from_step_code_is_a_step_failure(storage: rf.Storage) -> None:
    flow, log = _saga("defect13")

    @flow.step
    async def fetch(prepare: str) -> str:
        await _cancelled_by_someone_else()
        return "never"

    @flow.step
    async def after(fetch: str) -> str:
        log.append("after")
        return fetch

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "fetch"
    assert run.error.type == "CancelledError"
    assert run.steps["fetch"].status is rf.StepStatus.FAILED
    assert run.steps["after"].status is rf.StepStatus.PENDING
    assert log == ["prepare", "undo prepare"]
    assert (await flow.get(run.id)).status is rf.Status.FAILED


async def test_a_cancelled_error_from_a_when_condition_is_a_step_failure(
        storage: rf.Storage) -> None:
    flow, log = _saga("defect13when")

    async def only_if(prepare: str) -> bool:
        await _cancelled_by_someone_else()
        return True

    @flow.step(when=only_if)
    async def fetch(prepare: str) -> str:
        return "never"

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "fetch"
    assert run.steps["fetch"].status is rf.StepStatus.FAILED
    assert log == ["prepare", "undo prepare"]


async def test_a_real_cancellation_of_the_caller_still_aborts(storage: rf.Storage) -> None:
    flow, log = _saga("defect13real")
    started = anyio.Event()

    @flow.step
    async def slow(prepare: str) -> str:
        started.set()
        await anyio.sleep(30)
        return "never"

    async def drive() -> None:
        with pytest.raises(BaseException) as caught:  # the cancellation
            await flow.run()
        assert isinstance(caught.value, anyio.get_cancelled_exc_class())
        raise caught.value

    async with anyio.create_task_group() as tg:
        tg.start_soon(drive)
        await started.wait()
        tg.cancel_scope.cancel()
    page = await flow.list_runs()
    run_ids = [s.id for s in page.runs]
    assert len(run_ids) == 1
    run = await flow.get(run_ids[0])
    assert run.status is rf.Status.ABORTED
    assert log == ["prepare"]  # no rollback code ran


# -- item 24: an interrupt that reads an async step's result --------------------------------------


async def test_an_interrupt_reading_an_async_result_waits_for_it(storage: rf.Storage) -> None:
    flow, _ = _saga("defect24")

    @flow.async_step
    async def score(prepare: str) -> int:
        await anyio.sleep(0.2)  # still running when the interrupt is reached
        return 7

    @flow.interrupt(correlation_id=f"{flow.name}:{{score}}")
    async def approve(payload: Approval, score: int) -> str:
        return f"score {score} approved={payload.approved}"

    paused = await flow.run()
    assert paused.status is rf.Status.PAUSED
    assert paused.waiting_on == ["approve"]
    assert paused.steps["score"].status is rf.StepStatus.COMPLETED
    history = kinds(await flow.get(paused.id))
    assert history.index("step.completed:score") < history.index("interrupt.waiting:approve")
    done = await flow.continue_by_correlation_id(f"{flow.name}:7", step="approve",
                                                 payload=Approval(approved=True))
    assert done.status is rf.Status.COMPLETED
    assert done.value == "score 7 approved=True"


async def test_an_interrupt_whose_async_input_failed_rolls_the_run_back(
        storage: rf.Storage) -> None:
    flow, log = _saga("defect24fail")

    @flow.async_step
    async def score(prepare: str) -> int:
        await anyio.sleep(0.2)
        raise RuntimeError("scoring is down")

    @flow.interrupt
    async def approve(payload: Approval, score: int) -> str:
        return "never"

    run = await flow.run()
    assert run.status is rf.Status.FAILED  # not paused with a payload that could only fail
    assert run.error is not None and run.error.step == "approve"
    assert run.error.type == "AsyncUnitFailed"
    assert run.steps["approve"].status is rf.StepStatus.FAILED
    assert run.waiting_on == []
    assert log == ["prepare", "undo prepare"]


# -- item 25: a resume accepted while the run is busy ---------------------------------------------


def _two_interrupts(name: str) -> rf.Reactor:
    flow = rf.Reactor(unique(name))

    @flow.interrupt
    async def left(payload: Approval) -> bool:
        return payload.approved

    @flow.interrupt
    async def right(payload: Approval) -> bool:
        return payload.approved

    @flow.step
    async def both(left: bool, right: bool) -> str:
        return f"{left}/{right}"

    return flow


async def test_a_resume_accepted_while_the_run_is_busy_returns_it_running(
        storage: rf.Storage) -> None:
    flow = _two_interrupts("defect25")
    paused = await flow.run()
    assert sorted(paused.waiting_on) == ["left", "right"]
    assert await storage.acquire_lock(paused.id, "another-execution", 30.0)
    accepted = await flow.continue_(paused.id, step="left", payload=Approval(approved=True))
    assert accepted.status is rf.Status.RUNNING
    assert accepted.waiting_on == ["right"]
    with pytest.raises(rf.AlreadyResumed):
        await flow.continue_(paused.id, step="left", payload=Approval(approved=False))
    await storage.release_lock(paused.id, "another-execution")
    # the worker asked to apply `left` may hold the run now: then `right` is accepted the same way
    later = await flow.continue_(paused.id, step="right", payload=Approval(approved=False))
    assert later.status in (rf.Status.RUNNING, rf.Status.COMPLETED)
    assert later.waiting_on == []
    done = await _completed(flow, paused.id)
    assert done.value == "True/False"


async def test_every_loser_of_simultaneous_resumes_sees_the_run_running(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("defect25many"))
    names = [f"i{n}" for n in range(12)]
    for name in names:
        async def body(payload: Approval) -> bool:
            return payload.approved
        flow.interrupt(name=name)(body)

    @flow.step(after=names)
    async def end() -> str:
        return "all in"

    paused = await flow.run()
    assert sorted(paused.waiting_on) == sorted(names)
    results: dict[str, rf.Run] = {}

    async def resume(name: str) -> None:
        results[name] = await flow.continue_(paused.id, step=name,
                                             payload=Approval(approved=True))

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(resume, name)
    for name, run in results.items():
        assert name not in run.waiting_on, (name, run.status, run.waiting_on)
        assert run.status in (rf.Status.RUNNING, rf.Status.PAUSED, rf.Status.COMPLETED)
    assert (await _completed(flow, paused.id)).value == "all in"


async def _completed(flow: rf.Reactor, run_id: str) -> rf.Run:
    """The run once completed (claims accepted while it was busy are applied by its holder)."""
    with anyio.fail_after(30):
        while (run := await flow.get(run_id)).status is not rf.Status.COMPLETED:
            await anyio.sleep(0.05)
    return run


async def test_a_payload_accepted_while_busy_is_applied_before_the_run_would_pause(
        storage: rf.Storage) -> None:
    """The holder applies it at once: no intermediate `paused` for `wait` to return."""
    flow = rf.Reactor(unique("defect25holder"))
    entered, gate = anyio.Event(), anyio.Event()

    @flow.interrupt
    async def first(payload: Approval) -> bool:
        return payload.approved

    @flow.step
    async def slow(first: bool) -> str:
        entered.set()
        await gate.wait()
        return "slow"

    @flow.interrupt
    async def second(payload: Approval) -> bool:
        return payload.approved

    @flow.step
    async def end(slow: str, second: bool) -> str:
        return f"{slow} then {second}"

    paused = await flow.run()
    results: list[rf.Run] = []
    async with anyio.create_task_group() as tg:
        async def resume_first() -> None:
            results.append(await flow.continue_(paused.id, step="first",
                                                payload=Approval(approved=True)))

        tg.start_soon(resume_first)
        await entered.wait()
        during = await flow.continue_(paused.id, step="second",
                                      payload=Approval(approved=False))
        assert during.status is rf.Status.RUNNING and during.waiting_on == []
        gate.set()
    assert results[0].status is rf.Status.COMPLETED  # the holder applied `second` itself
    assert results[0].value == "slow then False"
    done = await flow.wait(paused.id, timeout=10)
    assert done.status is rf.Status.COMPLETED
    assert kinds(done, "run.paused") == ["run.paused"]  # only the first pause
