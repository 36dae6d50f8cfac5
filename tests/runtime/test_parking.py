"""Parking in one process, on both backends: a worker job (`jobs.execute_run`) parks for a
retry backoff or an async unit; a signal that is early or duplicated writes nothing; an
execution that does not park (the in-process sweeper) waits in place once the run is due; a run
that ends while a step waits for its next attempt fails that step for good (compensated)."""

from __future__ import annotations

import time

import anyio
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.runtime.engine.job_queue import Job, JobKind
from reactorflow.runtime.services import job_handling as jobs
from tests.helpers import Captured, kinds, unique

pytestmark = pytest.mark.usefixtures("storage")

attempts: list[int] = []
flow = rf.Reactor(unique("parking.retry"))


@flow.step(retries=rf.Retry(attempts=3, backoff=0.6, strategy="fixed"))
async def flaky(ctx: rf.StepContext) -> int:
    attempts.append(ctx.attempt)
    if ctx.attempt < 3:
        raise ConnectionError(f"not yet ({ctx.attempt})")
    return ctx.attempt


@pytest.fixture(autouse=True)
def _fresh_attempts() -> None:
    attempts.clear()


async def _retry_at(storage: rf.Storage, run_id: str) -> float:
    raw = await storage.load_step(run_id, "flaky")
    assert raw is not None
    at = records.decode_step(raw).retry_at
    assert at is not None
    return at


async def test_a_worker_job_parks_for_a_backoff_and_early_signals_write_nothing(
        storage: rf.Storage, captured: Captured) -> None:
    run = await flow.dispatch()
    assert captured.jobs == [Job(JobKind.RUN, run.id, flow.name)]
    await jobs.execute_run(run.id, flow.name)  # attempt 1 fails: the run parks
    parked = await flow.get(run.id)
    assert attempts == [1]
    assert parked.status is rf.Status.RUNNING
    assert kinds(parked, "run.parked") == ["run.parked"]
    # parking enqueued the run again, for when the next attempt is due
    assert captured.jobs[1:] == [Job(JobKind.RUN, run.id, flow.name)]
    retry_at = await _retry_at(storage, run.id)
    for _ in range(3):  # early (and duplicate) signals: nothing is due, nothing is written
        await jobs.execute_run(run.id, flow.name)
    if time.time() < retry_at:
        assert (await flow.get(run.id)).history == parked.history
        assert attempts == [1]
    with anyio.fail_after(10):
        while time.time() < retry_at:
            await anyio.sleep(0.05)
    await jobs.execute_run(run.id, flow.name)  # attempt 2 fails: parks again
    assert attempts == [1, 2]
    retry_at = await _retry_at(storage, run.id)
    with anyio.fail_after(10):
        while time.time() < retry_at:
            await anyio.sleep(0.05)
    await jobs.execute_run(run.id, flow.name)
    done = await flow.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.value == 3
    assert attempts == [1, 2, 3]
    assert kinds(done, "run.parked") == ["run.parked"] * 2
    assert done.steps["flaky"].attempts == 3


async def test_a_run_parked_for_a_backoff_is_driven_inline_by_the_sweeper_once_due(
        storage: rf.Storage, captured: Captured) -> None:
    rf.configure(stall_timeout=0.05)
    run = await flow.dispatch()
    await jobs.execute_run(run.id, flow.name)
    retry_at = await _retry_at(storage, run.id)
    with anyio.fail_after(10):
        while time.time() < retry_at:
            await anyio.sleep(0.05)
    report = await rf.sweep_once()  # no shared queue: re-driven here, sleeping its backoffs
    assert run.id in report.recovered
    done = await flow.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.value == 3
    assert attempts == [1, 2, 3]


# -- a run cancelled while it is parked between retry attempts -------------------------------------


def _retrying_flow(log: list[str], *, sibling_fails: bool = False) -> rf.Reactor:
    flow = rf.Reactor(unique("parked.retry"))

    @flow.step
    async def prepare() -> int:
        log.append("prepare")
        return 1

    @prepare.undo
    async def unprepare(result: int) -> None:
        log.append("undo prepare")

    tried = anyio.Event()

    @flow.step(retries=rf.Retry(attempts=3, backoff=0.6, strategy="fixed"))
    async def flaky(prepare: int, ctx: rf.StepContext) -> int:
        log.append(f"flaky {ctx.attempt}")
        tried.set()
        raise ConnectionError(f"not yet ({ctx.attempt})")

    @flaky.undo
    async def undo_flaky(result: int) -> None:
        log.append("undo flaky")

    @flaky.compensate
    async def compensate_flaky(error: Exception) -> None:
        log.append(f"compensate flaky ({type(error).__name__})")

    if sibling_fails:
        @flow.step
        async def sibling(prepare: int) -> int:
            await tried.wait()  # flaky has failed its first attempt
            raise RuntimeError("sibling fails")

    return flow


async def _parked(storage: rf.Storage, flow: rf.Reactor, log: list[str]) -> tuple[str, float]:
    """Dispatch a run and let a worker job take it until it parks after flaky's 1st attempt."""
    run = await flow.dispatch()
    await jobs.execute_run(run.id, flow.name)
    assert log == ["prepare", "flaky 1"]
    raw = await storage.load_step(run.id, "flaky")
    assert raw is not None
    retry_at = records.decode_step(raw).retry_at
    assert retry_at is not None  # parked between attempts
    return run.id, retry_at


async def test_a_run_cancelled_while_parked_between_attempts_fails_the_step_for_good(
        storage: rf.Storage, captured: Captured) -> None:
    log: list[str] = []
    flow = _retrying_flow(log)
    run_id, retry_at = await _parked(storage, flow, log)

    cancelled = await flow.cancel(run_id, reason="enough")
    assert cancelled.status is rf.Status.CANCELLED
    assert cancelled.steps["flaky"].status is rf.StepStatus.FAILED
    assert "step.failed:flaky" in kinds(cancelled)

    with anyio.fail_after(10):  # the wake-up job, arriving once the attempt was due
        while time.time() < retry_at:
            await anyio.sleep(0.05)
    await jobs.execute_run(run_id, flow.name)
    assert (await flow.get(run_id)).history == cancelled.history  # it did nothing
    assert log == ["prepare", "flaky 1"]

    undone = await flow.undo(run_id)
    assert log[2:] == ["compensate flaky (RecordedError)", "undo prepare"]
    assert undone.steps["flaky"].status is rf.StepStatus.COMPENSATED
    assert undone.steps["prepare"].status is rf.StepStatus.UNDONE


async def test_a_run_failing_while_a_step_waits_for_its_next_attempt_compensates_it(
        storage: rf.Storage, captured: Captured) -> None:
    log: list[str] = []
    flow = _retrying_flow(log, sibling_fails=True)
    run = await flow.dispatch()
    with anyio.fail_after(20):
        await jobs.execute_run(run.id, flow.name)
    failed = await flow.get(run.id)
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.step == "sibling"
    assert log == ["prepare", "flaky 1", "compensate flaky (RecordedError)", "undo prepare"]
    assert failed.steps["flaky"].status is rf.StepStatus.COMPENSATED
