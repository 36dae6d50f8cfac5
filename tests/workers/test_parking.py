"""Parking (issue 9): in a worker, a step that waits for an async unit parks its run (saved,
lock released, no thread held) and the unit's completion re-enqueues it, on real
`reactorflow worker` subprocesses and the suite's Redis."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import config, records
from reactorflow.runtime.engine import job_queue as queue
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import background as bg
from tests.workflows import parking as pk

pytestmark = pytest.mark.slow
__all__ = ["gates", "shared"]  # fixtures


async def _ready(workers: Workers) -> None:
    run = await bg.dispatched.dispatch()
    await bg.dispatched.wait(run.id, timeout=60)


def _count(run: rf.Run, kind: str) -> int:
    return sum(1 for e in run.history if e.kind == kind)


async def test_two_threads_serve_twenty_runs_that_each_wait_for_an_async_unit(
        shared: Shared, gates: Path) -> None:
    """Blocking readers would hold both threads while the units they wait for queue behind
    them (each reader gives up after the 10 s async_wait_timeout); parked ones hold none."""
    workers = Workers(shared, gates, module="tests.workflows.parking", threads=2,
                      env={pk.ASYNC_WAIT_ENV: "10"})
    try:
        await _ready(workers)
        started = [await pk.waits.dispatch(n=n) for n in range(20)]
        done = [await pk.waits.wait(run.id, timeout=60) for run in started]
    finally:
        workers.stop()
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 20
    assert [run.value for run in done] == [n * 10 + 1 for n in range(20)]
    assert sum(_count(run, "run.parked") for run in done) >= 1


async def test_a_parked_run_holds_no_lock_and_resumes_once_per_signal(
        shared: Shared, gates: Path) -> None:
    workers = Workers(shared, gates, module="tests.workflows.parking", threads=2)
    storage = config.current_storage()
    try:
        await _ready(workers)
        run = await pk.gated.dispatch()
        with anyio.fail_after(30):  # the unit is running (gated): the run parks
            while _count(parked := await pk.gated.get(run.id), "run.parked") == 0:
                await anyio.sleep(0.02)
        assert parked.status is rf.Status.RUNNING
        live = {x.run_id: x for x in await storage.scan_status([rf.Status.RUNNING], 1000)}
        assert live[run.id].lock_owner is None  # parked: it holds no lock
        # no thread either: the unit holds one of the two, the other serves other runs
        for _ in range(3):
            other = await bg.dispatched.dispatch()
            assert (await bg.dispatched.wait(other.id, timeout=30)).value == 42
        # signals before the unit finished (duplicates, early): nothing is written
        for _ in range(3):
            queue.enqueue_run(run.id, pk.gated.name, version=1)
        probe = await bg.dispatched.dispatch()
        await bg.dispatched.wait(probe.id, timeout=30)
        assert (await pk.gated.get(run.id)).history == parked.history
        (gates / "unit").touch()  # the unit finishes: its signal resumes the run
        done = await pk.gated.wait(run.id, timeout=30)
        assert done.status is rf.Status.COMPLETED and done.value == "read unit done"
        for _ in range(3):  # late duplicates: the run is done, nothing happens
            queue.enqueue_run(run.id, pk.gated.name, version=1)
        probe = await bg.dispatched.dispatch()
        await bg.dispatched.wait(probe.id, timeout=30)
    finally:
        workers.stop()
    final = await pk.gated.get(run.id)
    assert final.history == done.history
    assert _count(final, "run.parked") == 1
    assert bg.notes(shared.log).count("gated_reader") == 1
    assert bg.notes(shared.log).count("gated_unit") == 1


async def test_a_retry_backoff_in_a_worker_parks_the_run(shared: Shared, gates: Path) -> None:
    """The worker does not sleep through a step's backoff holding the run: it saves the step
    with the time of its next attempt, releases the run, and takes it on again then."""
    workers = Workers(shared, gates, module="tests.workflows.parking", threads=2)
    storage = config.current_storage()
    try:
        await _ready(workers)
        run = await pk.retrying.dispatch()
        with anyio.fail_after(30):
            while _count(parked := await pk.retrying.get(run.id), "run.parked") == 0:
                await anyio.sleep(0.01)
        raw = await storage.load_step(run.id, "flaky")
        assert raw is not None
        retry_at = records.decode_step(raw).retry_at
        assert retry_at is not None  # the time of its next attempt is stored
        live = {x.run_id: x for x in await storage.scan_status([rf.Status.RUNNING], 1000)}
        if time.time() < retry_at:  # read before the next attempt was due: nobody holds it
            assert live[run.id].lock_owner is None
        step = parked.steps["flaky"]
        assert step.status is rf.StepStatus.RUNNING and step.attempts == 1
        assert step.error is not None and "ConnectionError" in step.error
        done = await pk.retrying.wait(run.id, timeout=30)
    finally:
        workers.stop()
    assert done.status is rf.Status.COMPLETED
    assert done.value == "succeeded on attempt 3"
    assert done.steps["flaky"].attempts == 3 and done.steps["flaky"].error is None
    assert _count(done, "run.parked") == 2
    assert _count(done, "step.retried") == 2
    attempts = [n for n in bg.notes(shared.log) if n.startswith("flaky attempt")]
    assert [a.split()[2] for a in attempts] == ["1", "2", "3"]
    assert len({a.split()[3] for a in attempts}) == 1  # one idempotency key for all attempts
    assert "unflaky" not in bg.notes(shared.log)
