"""Forged jobs (issue 22, items 6 and 7): a job is checked before a worker acts on it. One
whose fields are malformed (an index past 2**31, a brace in a run id, a snooze count that is
no number...) never reaches a storage script; one that disagrees with its run's record (the
wrong reactor, declared here or not) is dropped. Either way the job is logged as dropped and the
healthy run it names is untouched: same status, same history, no element slot written, and it
still completes. Delivered through the in-process queue and the embedded Dramatiq worker (a
real `reactorflow worker` subprocess: tests/workers/test_forged_real_workers.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_queue import Job, JobKind, JobQueue
from reactorflow.runtime.services.local_queue import InProcessQueue
from reactorflow.workers.queue import DramatiqQueue, current_queue
from tests.helpers import Captured, unique

pytestmark = pytest.mark.usefixtures("storage")

DROPPED = "reactorflow.job.dropped"

healthy = rf.Reactor(unique("forged.healthy"))


@healthy.step
async def first() -> list[int]:
    return [1, 2]


@healthy.map_step(over="first", fan_out=True)
async def double(item: int) -> int:
    return 2 * item


@healthy.interrupt
async def gate(payload: str, double: list[int]) -> str:
    return f"{payload}:{sum(double)}"


other = rf.Reactor(unique("forged.other"))
"""A declared reactor of another shape, with a fanned-out map of the same key."""


@other.step
async def first_other() -> list[int]:
    return [7]


@other.map_step(over="first_other", fan_out=True)
async def double_other(item: int) -> int:
    raise AssertionError("a forged job ran another reactor's element")


@pytest.fixture(params=["in-process", "dramatiq"])
def worker(request: pytest.FixtureRequest) -> Iterator[JobQueue]:
    """The worker path under test, registered as the runtime's queue."""
    under_test: JobQueue = InProcessQueue() if request.param == "in-process" else DramatiqQueue()
    queue.register(lambda: under_test)
    try:
        yield under_test
    finally:
        queue.register(current_queue)
        if isinstance(under_test, InProcessQueue):
            under_test.close()


async def _paused() -> rf.Run:
    run = await healthy.run()
    if run.status is rf.Status.RUNNING:  # parked at the fanned-out map: the worker finishes it
        run = await healthy.wait(run.id, timeout=30)
    assert run.status is rf.Status.PAUSED, run
    return run


def _forged(run_id: str) -> dict[str, Job]:
    """(An element job of another declared reactor: `test_an_element_job_of_a_twin_...`; once
    the map settled, its element's lock is left held until it lapses, and such a job then
    takes nothing.)"""
    huge = 2**53 + 2  # Lua's loop over it never advanced: it hung Redis for every client
    return {
        "run of another reactor": Job.run(run_id, other.name, version=1),
        "run of an undeclared reactor": Job.run(run_id, "no.such.reactor", version=1),
        "unit of another reactor": Job.unit(run_id, other.name, "gate", version=1),
        "unit of an undeclared reactor": Job.unit(run_id, "no.such.reactor", "gate", version=1),
        "element of an undeclared reactor": Job.element(run_id, "no.such.reactor", "double", 0,
                                                        version=1),
        "undo of an undeclared reactor": Job.undo(run_id, "no.such.reactor", "double", 0,
                                                  version=1),
        "element index 2**53 + 2": Job.element(run_id, healthy.name, "double", huge, version=1),
        "undo index 2**53 + 2": Job.undo(run_id, healthy.name, "double", huge, version=1),
        "element index -1": Job.element(run_id, healthy.name, "double", -1, version=1),
        "element index past the map": Job.element(run_id, healthy.name, "double", 2, version=1),
        "element chunk past the map": Job.element(run_id, healthy.name, "double", 1, version=1,
                                                  count=2),
        "element chunk of none": Job.element(run_id, healthy.name, "double", 0, version=1,
                                             count=0),
        "element chunk of 2**53 + 2": Job.element(run_id, healthy.name, "double", 0, version=1,
                                                  count=huge),
        "element index of text": Job(JobKind.ELEMENT, run_id, healthy.name, "double",
                                     index="0"),  # type: ignore[arg-type]
        "run id with a brace": Job.run(run_id + "}", healthy.name, version=1),
        "run id not text": Job(JobKind.RUN, [run_id], healthy.name),  # type: ignore[arg-type]
        "step not a key": Job.unit(run_id, healthy.name, "gate\nrm -rf", version=1),
        "snoozes negative": Job.run(run_id, healthy.name, snoozes=-1, version=1),
    }


CASES = list(_forged("x"))


async def _until_dropped(caplog: pytest.LogCaptureFixture, count: int) -> list[str]:
    with anyio.fail_after(30):  # a guard against a hang, not a timing assertion
        while True:
            found = [r.getMessage() for r in caplog.records if r.getMessage().startswith(DROPPED)]
            if len(found) >= count:
                return found
            await anyio.sleep(0.01)


@pytest.mark.parametrize("case", CASES)
async def test_a_forged_job_is_dropped_and_the_run_is_untouched(
        storage: rf.Storage, worker: JobQueue, caplog: pytest.LogCaptureFixture,
        case: str) -> None:
    caplog.set_level(logging.INFO)
    paused = await _paused()
    slots = await storage.load_elements(paused.id, "double", 0, 2)
    worker.enqueue(_forged(paused.id)[case])
    dropped = await _until_dropped(caplog, 1)
    assert "the job was dropped and nothing was written" in dropped[0]
    assert await healthy.get(paused.id) == paused  # status, history, error: all as they were
    assert await storage.load_elements(paused.id, "double", 0, 2) == slots
    done = await healthy.continue_(paused.id, step="gate", payload="ok")
    if done.status is rf.Status.RUNNING:  # accepted while a stray job of the map's own chain
        done = await healthy.wait(done.id, timeout=30)  # held the lock: applied once it is free
    assert done.status is rf.Status.COMPLETED and done.value == "ok:6"


async def test_the_reason_names_the_field_and_the_stored_reactor(
        worker: JobQueue, caplog: pytest.LogCaptureFixture) -> None:
    paused = await _paused()
    forged = _forged(paused.id)
    worker.enqueue(forged["element index 2**53 + 2"])
    worker.enqueue(forged["run of another reactor"])
    found = " | ".join(await _until_dropped(caplog, 2))
    assert f"index {2**53 + 2} is out of range (0 to {2**31 - 1})" in found
    assert f"belongs to reactor {healthy.name!r}, not {other.name!r}" in found


async def test_a_forged_job_given_up_on_fails_nothing(storage: rf.Storage,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """The queue's give-up path (its retries used up) checks the job the same way."""
    from reactorflow.runtime.services import job_handling as jobs

    paused = await _paused()
    for job in _forged(paused.id).values():
        await jobs.give_up(job, "retries exhausted")
    assert len(await _until_dropped(caplog, len(CASES))) == len(CASES)
    assert await healthy.get(paused.id) == paused


async def test_an_element_job_of_a_twin_reactor_runs_nothing(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    """A declared reactor with a map of the same key: the element job is checked against the
    map's own job data (no read of the run), and the genuine element still runs."""
    from reactorflow.runtime.services import job_handling as jobs

    kept = Captured()
    queue.register(lambda: kept)
    try:
        run = await healthy.run()
        assert run.status is rf.Status.RUNNING  # parked at the map, its element jobs kept
        await jobs.execute_element(run.id, other.name, "double", 0)
        assert DROPPED in caplog.text and "not " + repr(other.name) in caplog.text
        assert await storage.load_elements(run.id, "double", 0, 2) == [None, None]
        for job in list(kept.jobs):
            await jobs.execute(job)
    finally:
        queue.register(current_queue)
    assert await storage.count_elements(run.id, "double") == 2


def test_every_job_field_is_checked() -> None:
    """The check covers each field a job carries (a new field must be added to it)."""
    from reactorflow.runtime.engine.job_checks import malformed

    bad: dict[str, Any] = {"run_id": 1, "reactor": "a b", "step": "", "index": 2**31,
                           "snoozes": "1", "headers": {"k": 1}, "version": 0, "refused": "x",
                           "count": 0}
    assert set(bad) == set(Job.__struct_fields__) - {"kind"}
    good = Job.element("r1", "flow", "m", 0, version=1)
    assert malformed(good) is None
    for name, value in bad.items():
        problem = malformed(msgspec.structs.replace(good, **{name: value}))
        assert problem is not None and problem.startswith(name), (name, problem)
