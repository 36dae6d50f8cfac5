"""The real-worker lane of an operator's pause (issue 27 item 3): a dispatched run whose steps
run in a `reactorflow worker` subprocess is paused at its next step boundary (its step in
flight finishes there), then resumed: a worker takes it on and it completes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from tests.workers.test_real_workers import Shared, Workers, gates, shared  # noqa: F401
from tests.workflows import background as bg
from tests.workflows.pausable import paused_flow

pytestmark = pytest.mark.slow


@pytest.fixture
def pause_workers(shared: Shared, gates: Path) -> Iterator[Workers]:  # noqa: F811
    started = Workers(shared, gates, module="tests.workflows.pausable")
    yield started
    started.stop()


async def _noted(log: Path, line: str) -> None:
    with anyio.fail_after(30):
        while line not in bg.notes(log):
            await anyio.sleep(0.02)


async def test_a_dispatched_run_is_paused_in_its_worker_and_resumed_there(
        shared: Shared, gates: Path, pause_workers: Workers) -> None:  # noqa: F811
    rf.configure(lock_wait=0.3)  # the pause returns with its request left while a step runs
    run = await paused_flow.dispatch()
    await _noted(shared.log, "second started")  # the worker holds the run, `second` in flight
    asked = await paused_flow.pause(run.id, reason="supplier outage", by="ops")
    assert asked.status is rf.Status.RUNNING  # requested: the worker stops at the boundary
    (gates / "second").touch()  # the step in flight finishes
    paused = await paused_flow.wait(run.id, timeout=30)
    assert paused.status is rf.Status.PAUSED
    assert paused.paused_by is not None and paused.paused_by.by == "ops"
    assert paused.steps["second"].status is rf.StepStatus.COMPLETED  # it finished ...
    assert paused.steps["third"].status is rf.StepStatus.PENDING  # ... and nothing started
    assert await config.current_storage().lock_owner(run.id) is None

    resumed = await paused_flow.resume(run.id)  # a dispatched run goes back to a worker
    assert resumed.status is rf.Status.RUNNING
    done = await paused_flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    assert done.value == 3
    notes = bg.notes(shared.log)
    assert notes.count("third") == 1 and notes.count("second") == 1
    ran_in = bg.pids(shared.log, "third")
    assert ran_in and os.getpid() not in ran_in
