"""The job-queue contract (`reactorflow.runtime.engine.job_queue.JobQueue`): the in-process
queue and the Dramatiq queue (on its embedded StubBroker worker) pass the same tests, on both
backends."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from dramatiq.brokers.stub import StubBroker

import reactorflow as rf
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_queue import Job, JobKind, JobQueue
from reactorflow.runtime.services.local_queue import InProcessQueue
from reactorflow.workers.queue import DramatiqQueue, current_queue
from tests.helpers import Captured, unique

pytestmark = pytest.mark.usefixtures("storage")

ran: Counter[tuple[str, str]] = Counter()  # (run id, step) -> times its body ran
started: dict[tuple[str, str], float] = {}
_mutex = threading.Lock()

def _note(ctx: rf.StepContext) -> None:
    with _mutex:
        ran[ctx.run_id, ctx.step] += 1
        started.setdefault((ctx.run_id, ctx.step), time.time())

flow = rf.Reactor(unique("queue.contract"))

@flow.step
async def first(ctx: rf.StepContext) -> int:
    _note(ctx)
    return 1

@flow.step
async def second(first: int, ctx: rf.StepContext) -> int:
    _note(ctx)
    return first + 1

units = rf.Reactor(unique("queue.units"))

@units.async_step
async def unit(ctx: rf.StepContext) -> str:
    _note(ctx)
    return "from the unit"

@units.step
async def reader(unit: str) -> str:
    return f"read {unit}"

@pytest.fixture(params=["in-process", "dramatiq"])
def jobs(request: pytest.FixtureRequest) -> Iterator[JobQueue]:
    """The queue under test, registered as the runtime's queue for the test."""
    under_test: JobQueue
    if request.param == "in-process":
        local = InProcessQueue()
        under_test = local
    else:
        under_test = DramatiqQueue()
    queue.register(lambda: under_test)
    try:
        yield under_test
    finally:
        queue.register(current_queue)
        if request.param == "in-process":
            local.close()

async def _handed_off_run(jobs: JobQueue) -> tuple[str, Job]:
    """A dispatched run whose job was kept back (nothing has taken it yet)."""
    captured = Captured()
    queue.register(lambda: captured)
    try:
        run = await flow.dispatch()
    finally:
        queue.register(lambda: jobs)
    assert captured.jobs == [Job(JobKind.RUN, run.id, flow.name)]
    return run.id, captured.jobs[0]

def _ran(run_id: str) -> dict[str, int]:
    with _mutex:
        return {step: n for (rid, step), n in ran.items() if rid == run_id}

async def test_a_run_job_takes_the_run_to_its_end(jobs: JobQueue) -> None:
    run = await flow.dispatch()
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and done.value == 2
    assert _ran(run.id) == {"first": 1, "second": 1}

async def test_a_unit_job_runs_the_unit_and_its_reader_gets_its_value(jobs: JobQueue) -> None:
    run = await units.run()
    assert run.status is rf.Status.COMPLETED
    assert run.value == "read from the unit"
    assert _ran(run.id) == {"unit": 1}

async def test_a_delayed_job_starts_no_earlier_than_its_delay(jobs: JobQueue) -> None:
    run_id, job = await _handed_off_run(jobs)
    enqueued = time.time()
    jobs.enqueue(job, delay=0.4)
    done = await flow.wait(run_id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    assert started[run_id, "first"] >= enqueued + 0.4

async def test_the_same_job_many_times_runs_each_step_once(jobs: JobQueue) -> None:
    run_id, job = await _handed_off_run(jobs)
    for _ in range(4):
        jobs.enqueue(job)
    done = await flow.wait(run_id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    for _ in range(2):  # more copies after the end: nothing left to do
        jobs.enqueue(job)
    again = await _second_run_done(jobs)  # a later job on the same queue has run
    assert again.status is rf.Status.COMPLETED
    assert _ran(run_id) == {"first": 1, "second": 1}
    assert (await flow.get(run_id)).history == done.history

async def _second_run_done(jobs: JobQueue) -> rf.Run:
    run = await flow.dispatch()
    return await flow.wait(run.id, timeout=30)

async def test_jobs_may_be_enqueued_from_any_thread(jobs: JobQueue) -> None:
    run_id, job = await _handed_off_run(jobs)
    thread = threading.Thread(target=jobs.enqueue, args=(job,))
    thread.start()
    thread.join()
    done = await flow.wait(run_id, timeout=30)
    assert done.status is rf.Status.COMPLETED

async def test_a_job_for_a_run_that_does_not_exist_is_harmless(jobs: JobQueue) -> None:
    jobs.enqueue(Job.run("no-such-run", flow.name, version=1))
    jobs.enqueue(Job.unit("no-such-run", units.name, "unit", version=1))
    done = await _second_run_done(jobs)
    assert done.status is rf.Status.COMPLETED

async def test_an_embedded_queue_is_not_shared(jobs: JobQueue) -> None:
    assert jobs.shared is False

def test_the_dramatiq_queue_is_shared_once_a_broker_is_configured() -> None:
    rf.configure(broker=StubBroker())
    assert DramatiqQueue().shared is True

def test_a_job_names_its_work_by_identity() -> None:
    assert Job.run("r1", "flow", snoozes=2, version=1) == Job(JobKind.RUN, "r1", "flow", snoozes=2)
    assert Job.unit("r1", "flow", "a.b", version=1) == Job(JobKind.UNIT, "r1", "flow", "a.b")

def test_an_unregistered_queue_is_a_clear_error() -> None:
    queue.register(None)
    try:
        with pytest.raises(rf.ConfigurationError, match="no job queue is registered"):
            queue.current()
    finally:
        queue.register(current_queue)
