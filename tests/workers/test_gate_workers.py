"""Gates on real `reactorflow worker` subprocesses and the suite's Redis: contention snoozes
(never blocks a thread), and ordered locks keep the dispatch order, passing over a dead
predecessor."""

from __future__ import annotations

from pathlib import Path

import pytest

import reactorflow as rf
from reactorflow import config
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import background as bg
from tests.workflows import gated as gt

pytestmark = pytest.mark.slow
__all__ = ["gates", "shared"]  # fixtures


async def _ready() -> None:
    run = await bg.dispatched.dispatch()
    await bg.dispatched.wait(run.id, timeout=60)


async def test_two_threads_serve_ten_contended_runs(shared: Shared, gates: Path) -> None:
    """The first run holds the lock until the test lets it go; while it does, the nine others
    snooze (put back on the queue, holding nothing), so the second thread stays free: an
    unrelated run completes meanwhile. Then all ten finish, one at a time."""
    workers = Workers(shared, gates, module="tests.workflows.gated", threads=2)
    try:
        await _ready()
        first = await gt.contended.dispatch(n=0, hold=True)
        others = [await gt.contended.dispatch(n=n) for n in range(1, 10)]
        for _ in range(3):  # a thread is free while the lock is held and nine runs want it
            free = await bg.dispatched.dispatch()
            assert (await bg.dispatched.wait(free.id, timeout=30)).value == 42
        (gates / "release").touch()
        done = [await gt.contended.wait(run.id, timeout=90) for run in [first, *others]]
    finally:
        workers.stop()
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 10
    lines = [line for line in bg.notes(shared.log) if line.startswith(("start", "end"))]
    assert len(lines) == 20
    for i in range(0, 20, 2):  # never two at once: each start is followed by its own end
        assert lines[i].split()[1] == lines[i + 1].split()[1]
        assert (lines[i].split()[0], lines[i + 1].split()[0]) == ("start", "end")
    snoozed = sum(1 for run in done for e in run.history if e.kind == "run.snoozed")
    assert snoozed >= 9  # every other run found the lock busy at least once
    assert all(run.steps["work"].attempts == 1 for run in done)  # snoozes used no retries


async def test_twenty_dispatched_runs_apply_in_order_past_a_dead_predecessor(
        shared: Shared, gates: Path) -> None:
    storage = config.current_storage()
    workers = Workers(shared, gates, module="tests.workflows.gated", threads=4)
    try:
        await _ready()
        started = []
        for n in range(20):
            if n == 7:  # a predecessor whose worker died: it never runs, never leaves the line
                await storage.ordered_enter("tests.gated:line:L", "dead-run")
            started.append(await gt.ordered.dispatch(lane="L", n=n))
        done = [await gt.ordered.wait(run.id, timeout=120) for run in started]
    finally:
        workers.stop()
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 20
    applied = [int(line.split()[2]) for line in bg.notes(shared.log)
               if line.startswith("apply L ")]
    assert applied == list(range(20))
