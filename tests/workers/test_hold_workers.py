"""The real-worker lane of repair (issue 27): a dispatched run held by a step that failed in a
`reactorflow worker` subprocess is retried there after the fix, and rewound there: each
repair hands the run back to a worker, which runs the steps again."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import reactorflow as rf
from tests.workers.test_real_workers import Shared, Workers, gates, shared  # noqa: F401
from tests.workflows import background as bg
from tests.workflows.holdable import held_flow

pytestmark = pytest.mark.slow


@pytest.fixture
def hold_workers(shared: Shared, gates: Path) -> Iterator[Workers]:  # noqa: F811
    started = Workers(shared, gates, module="tests.workflows.holdable")
    yield started
    started.stop()


async def test_a_run_held_in_a_worker_is_retried_and_rewound_in_a_worker(
        shared: Shared, gates: Path, hold_workers: Workers) -> None:  # noqa: F811
    run = await held_flow.dispatch()
    held = await held_flow.wait(run.id, timeout=30)  # wait returns on a held run
    assert held.status is rf.Status.HELD and held.error is not None
    assert held.error.step == "charge" and bg.notes(shared.log) == ["draft", "charge"]

    (gates / "fixed").touch()  # the fix is deployed
    asked = await held_flow.retry_step(run.id, "charge")  # always_dispatch: a worker goes on
    assert asked.status is rf.Status.RUNNING
    done = await held_flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and done.value == "D+charged+receipt"
    assert bg.notes(shared.log) == ["draft", "charge", "charge", "receipt"]

    await held_flow.rewind(run.id, to="charge")
    again = await held_flow.wait(run.id, timeout=30)
    assert again.status is rf.Status.COMPLETED
    assert bg.notes(shared.log)[4:] == ["refund", "charge", "receipt"]  # draft kept
    workers_ran = bg.pids(shared.log, "receipt")
    assert workers_ran and os.getpid() not in workers_ran
