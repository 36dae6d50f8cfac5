"""Forged jobs on a real `reactorflow worker` subprocess (issue 22, item 7; the in-process and
embedded lanes: tests/workers/test_forged_jobs.py). A message sent through the real Dramatiq
broker on the suite's Redis, naming a paused healthy run: a run job of another declared
reactor than the stored run's, or an element job whose index is 2**53 + 2 (its Lua loop never
advanced: it hung Redis for every client). The worker drops it and logs
`reactorflow.job.dropped`; the run is untouched and still completes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.workers.broker import actors_for, send
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import background as bg
from tests.workflows import forged

pytestmark = pytest.mark.slow
__all__ = ["gates", "shared"]  # fixtures, used by name
DROPPED = "reactorflow.job.dropped"
HUGE = 2**53 + 2


def _run_of_another_reactor(run_id: str) -> tuple[str, Any]:
    actors = actors_for(config.settings().broker)
    return (f"belongs to reactor {forged.healthy.name!r}, not {forged.other.name!r}",
            actors.execute_run.message(run_id, forged.other.name, 0))


def _element_index_past_2_53(run_id: str) -> tuple[str, Any]:
    actors = actors_for(config.settings().broker)
    return (f"index {HUGE} is out of range",
            actors.execute_element.message(run_id, forged.healthy.name, "double", HUGE))


FORGERIES: dict[str, Callable[[str], tuple[str, Any]]] = {
    "run job of another declared reactor": _run_of_another_reactor,
    "element job with index 2**53 + 2": _element_index_past_2_53,
}


def _dropped(shared: Shared) -> list[str]:
    """The workers' `reactorflow.job.dropped` log lines so far."""
    path = shared.log.with_suffix(".stderr")
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [line for line in text.splitlines() if DROPPED in line]


@pytest.mark.parametrize("forgery", list(FORGERIES))
async def test_a_forged_job_sent_to_a_real_worker_is_dropped_and_the_run_completes(
        shared: Shared, gates: Path, forgery: str) -> None:
    storage = config.current_storage()
    workers = Workers(shared, gates, module="tests.workflows.forged", threads=2)
    try:
        run = await forged.healthy.run()
        assert run.status is rf.Status.RUNNING  # parked at the map: the worker runs it
        paused = await forged.healthy.wait(run.id, timeout=30)
        assert paused.status is rf.Status.PAUSED, paused
        slots = await storage.load_elements(paused.id, "double", 0, 2)
        assert _dropped(shared) == []

        reason, message = FORGERIES[forgery](paused.id)
        send(message, config.settings().broker, None)  # as any client of the broker could
        with anyio.fail_after(20):  # the workers' log lines reach the file via their master
            while not _dropped(shared):
                now = await forged.healthy.get(paused.id)
                assert now == paused, f"the forged job changed the run: {now}"
                await anyio.sleep(0.05)
        dropped = _dropped(shared)
        assert len(dropped) == 1 and f"run_id={paused.id!r}" in dropped[0], dropped
        assert reason in dropped[0] and "nothing was written" in dropped[0], dropped

        assert await forged.healthy.get(paused.id) == paused  # status, history, error
        assert await storage.load_elements(paused.id, "double", 0, 2) == slots
        done = await forged.healthy.continue_(paused.id, step="gate", payload="ok")
        if done.status is rf.Status.RUNNING:
            done = await forged.healthy.wait(done.id, timeout=30)
    finally:
        workers.stop()
    assert done.status is rf.Status.COMPLETED and done.value == "ok:6", done
    noted = bg.notes(shared.log)
    assert sorted(line for line in noted if line.startswith("double")) == [
        "double 1", "double 2"]  # each element ran once, none again for the forged job
    assert "other ran" not in noted and noted.count("first") == 1
