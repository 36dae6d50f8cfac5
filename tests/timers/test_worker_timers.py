"""Timers on real `reactorflow worker` subprocesses and the suite's Redis: sleeping runs hold
no thread, each timer fires once with two worker processes firing, and a worker SIGKILLed
while it fires leaves nothing lost (the lease lets the other take the timer)."""

from __future__ import annotations

import collections
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import background as bg
from tests.workflows import sleeping as sl

pytestmark = pytest.mark.slow
__all__ = ["gates", "shared"]  # fixtures


async def _all_asleep(runs: list[rf.Run]) -> None:
    with anyio.fail_after(30):
        while True:
            seen = [await sl.naps.get(run.id) for run in runs]
            if all(r.steps["nap"].status is rf.StepStatus.WAITING for r in seen):
                return
            await anyio.sleep(0.05)


async def _all_done(runs: list[rf.Run], timeout: float) -> list[rf.Run]:
    return [await sl.naps.wait(run.id, timeout=timeout) for run in runs]


async def test_a_two_thread_worker_serves_fifty_sleeping_runs_and_then_more_work(
        shared: Shared, gates: Path) -> None:
    workers = Workers(shared, gates, module="tests.workflows.sleeping", threads=2)
    try:
        sleepers = [await sl.naps.dispatch(n=n, seconds=3.0) for n in range(50)]
        # while all fifty sleep, the two threads are free: other work goes through at once
        await _all_asleep(sleepers)
        storage = config.current_storage()
        live = {x.run_id: x for x in await storage.scan_status([rf.Status.RUNNING], 1000)}
        assert all(live[run.id].lock_owner is None for run in sleepers)  # no lock held
        other = await bg.dispatched.dispatch()
        assert (await bg.dispatched.wait(other.id, timeout=10)).value == 42
        done = await _all_done(sleepers, timeout=60)
    finally:
        workers.stop()
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 50
    assert [run.value for run in done] == [n * 2 for n in range(50)]
    woke = collections.Counter(bg.notes(shared.log))
    assert all(woke[f"woke {n}"] == 1 for n in range(50))


async def test_two_worker_processes_fire_each_timer_once(shared: Shared, gates: Path) -> None:
    workers = [Workers(shared, gates, module="tests.workflows.sleeping", threads=2)
               for _ in range(2)]
    try:
        sleepers = [await sl.naps.dispatch(n=n, seconds=1.5) for n in range(40)]
        done = await _all_done(sleepers, timeout=60)
    finally:
        for worker in workers:
            worker.stop()
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 40
    woke = collections.Counter(bg.notes(shared.log))
    assert {n: woke[f"woke {n}"] for n in range(40)} == dict.fromkeys(range(40), 1)
    for run in done:  # never early
        nap = run.steps["nap"]
        assert nap.result is not None and nap.finished_at is not None
        assert nap.finished_at >= nap.result.timestamp()


async def test_a_worker_killed_while_its_timers_fall_due_loses_none(
        shared: Shared, gates: Path) -> None:
    first = Workers(shared, gates, module="tests.workflows.sleeping", threads=2)
    second: Workers | None = None
    try:
        sleepers = [await sl.naps.dispatch(n=n, seconds=2.0) for n in range(20)]
        await _all_asleep(sleepers)
        await anyio.sleep(1.9)  # about the moment they fall due
        first.kill()
        second = Workers(shared, gates, module="tests.workflows.sleeping", threads=2)
        done = await _all_done(sleepers, timeout=90)
    finally:
        first.kill()
        if second is not None:
            second.stop()
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 20
    woke = collections.Counter(bg.notes(shared.log))
    assert all(woke[f"woke {n}"] == 1 for n in range(20))
