"""Versions on the real-worker lane (api.md §14): `reactorflow worker` subprocesses that declare
different versions of one reactor (tests/workflows/rolling_v1.py, rolling_v2.py,
rolling_migrating.py) share one queue, as in a rolling deploy. A job for a version a worker
lacks is handed back for another worker (no retry consumed, no busy loop), or, past the
patience, its run fails with `DefinitionChanged`; a worker with a migration from it moves the
run onto its version."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow.definition import naming
from reactorflow.runtime.services.version_gate import HANDBACK_DELAY
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import background as bg
from tests.workflows import rolling, rolling_v1, rolling_v2

pytestmark = pytest.mark.slow
__all__ = ["gates", "shared"]  # fixtures

V1_STEPS = ("fetch", "pack")
V2_STEPS = ("load", "weigh", "ship")
RUNS = 40
"""Runs of each version the rolling deploy dispatches."""
PATIENCE = 2.0
"""Seconds a worker of the patience test hands a job back before it fails the run."""


@contextmanager
def old_code_only() -> Iterator[None]:
    """This process as the old code: version 2 undeclared, so new runs start on version 1."""
    naming.forget(rolling_v2.flow)
    try:
        yield
    finally:
        naming.register(rolling_v2.flow)


def _worker(shared: Shared, gates: Path, module: str, **env: str) -> Workers:
    return Workers(shared, gates, module=module, threads=4,
                   env={rolling.DELIVERIES_ENV: "1", **env})


async def _settled(run_ids: list[str], timeout: float = 60) -> list[rf.Run]:
    """Each run once it has settled (polled: a run handed back has no completion to wait
    for until a worker with its version takes it)."""
    settled: dict[str, rf.Run] = {}
    with anyio.fail_after(timeout):
        while len(settled) < len(run_ids):
            for run_id in run_ids:
                if run_id not in settled:
                    run = await rolling_v2.flow.get(run_id)
                    if run.status in (rf.Status.COMPLETED, rf.Status.FAILED):
                        settled[run_id] = run
            await anyio.sleep(0.05)
    return [settled[run_id] for run_id in run_ids]


def _steps_by_pid(log: Path) -> dict[tuple[str, str, str], list[int]]:
    """(version, step, run) -> the pids of the processes that ran it, from the notes."""
    ran: dict[tuple[str, str, str], list[int]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        what, _, pid = line.rpartition(" pid=")
        parts = what.split(" ")
        if len(parts) == 3 and parts[0] in ("v1", "v2"):  # (a step's note: rolling.step_note)
            ran.setdefault((parts[0], parts[1], parts[2]), []).append(int(pid))
    return ran


def _deliveries(log: Path, run_id: str) -> list[str]:
    """The notes of the deliveries of run `run_id`'s job (tests/workflows/rolling.py)."""
    return [line for line in bg.notes(log) if line.startswith(rolling.delivery(run_id))]


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


async def test_a_rolling_deploy_runs_each_version_on_its_own_workers(
        shared: Shared, gates: Path) -> None:
    """One worker has version 1 only, one version 2 only; 40 runs of each are dispatched. Each
    run is finished by the worker of its version (the other hands its job back), none is lost
    or failed, and no step runs twice."""
    old = _worker(shared, gates, "tests.workflows.rolling_v1")
    new = _worker(shared, gates, "tests.workflows.rolling_v2")
    try:
        with old_code_only():
            v1_ids = [(await rolling_v1.flow.dispatch()).id for _ in range(RUNS)]
        v2_ids = [(await rolling_v2.flow.dispatch()).id for _ in range(RUNS)]
        done = await _settled(v1_ids + v2_ids)
        ran = _steps_by_pid(shared.log)
        groups = {pid: _group(pid) for pids in ran.values() for pid in pids}  # workers alive
    finally:
        old.terminate()  # both stop at once
        new.stop()
        old.stop()

    assert [run.status for run in done] == [rf.Status.COMPLETED] * (2 * RUNS)
    assert [run.version for run in done] == [1] * RUNS + [2] * RUNS
    assert [run.value for run in done] == ["v1+pack"] * RUNS + ["v2+weigh+ship"] * RUNS
    expected = {("v1", step, run_id) for run_id in v1_ids for step in V1_STEPS} | {
        ("v2", step, run_id) for run_id in v2_ids for step in V2_STEPS}
    assert set(ran) == expected  # every step of each run's own version, no other
    assert [key for key, pids in ran.items() if len(pids) != 1] == []  # none twice
    by_worker = {version: {groups[pids[0]] for (v, _, _), pids in ran.items() if v == version}
                 for version in ("v1", "v2")}
    assert by_worker == {"v1": {old.proc.pid}, "v2": {new.proc.pid}}
    # a job that reached the worker without its version went back on the queue, unretried
    deliveries = [line for run_id in v1_ids + v2_ids for line in _deliveries(shared.log, run_id)]
    assert all(line.endswith(" retries=0") for line in deliveries), deliveries
    assert len(deliveries) >= 2 * RUNS


async def test_a_job_for_a_version_no_worker_has_fails_its_run_after_the_patience(
        shared: Shared, gates: Path) -> None:
    """The only worker declares version 2 (no migration): a version-1 run's job is handed back,
    unretried and about every `HANDBACK_DELAY` seconds (no busy loop), the run in flight
    meanwhile, until the patience has passed; then the run fails with `DefinitionChanged`
    naming version 1, having run nothing."""
    with old_code_only():
        run = await rolling_v1.flow.dispatch()
    dispatched = (await rolling_v2.flow.get(run.id)).created_at
    workers = _worker(shared, gates, "tests.workflows.rolling_v2",
                      **{rolling.PATIENCE_ENV: str(PATIENCE)})
    try:
        with anyio.fail_after(30):  # handed back at least once, still in flight
            while len(_deliveries(shared.log, run.id)) < 2:
                await anyio.sleep(0.02)
        (failed,) = await _settled([run.id], timeout=30)
    finally:
        workers.stop()

    assert failed.status is rf.Status.FAILED and failed.version == 1
    assert failed.error is not None and failed.error.type == "DefinitionChanged"
    assert "version 1" in failed.error.message, failed.error.message
    assert _steps_by_pid(shared.log) == {}  # no step ran anywhere
    kinds = Counter(event.kind for event in failed.history)
    assert kinds[rf.EventKind.RUN_FAILED] == 1
    failed_at = next(e.at for e in failed.history if e.kind == rf.EventKind.RUN_FAILED)
    assert failed_at - dispatched >= PATIENCE  # not before the patience ran out
    deliveries = _deliveries(shared.log, run.id)
    assert all(line.endswith(" version=1 retries=0") for line in deliveries), deliveries
    # each hand-back is delivered again HANDBACK_DELAY seconds later at the earliest
    assert len(deliveries) <= (failed_at - dispatched) / HANDBACK_DELAY + 2, deliveries


async def test_a_worker_with_a_migration_moves_a_version_1_run_onto_version_2(
        shared: Shared, gates: Path) -> None:
    """The only worker has version 2 and `@migrate(from_version=1)` (version 1's module is no
    longer deployed): a version-1 run whose `fetch` ran here is migrated by the worker that
    takes its job (`fetch` becomes `load`, never run again) and finishes on version 2."""
    with old_code_only():
        started = await rolling_v1.flow.run()  # fetch here, then the hand-off to a worker
    assert started.status is rf.Status.RUNNING and started.version == 1
    workers = _worker(shared, gates, "tests.workflows.rolling_migrating")
    try:
        (done,) = await _settled([started.id], timeout=30)
        ran = _steps_by_pid(shared.log)
        groups = {pid: _group(pid) for pids in ran.values() for pid in pids}
    finally:
        workers.stop()

    assert done.status is rf.Status.COMPLETED and done.version == 2
    assert done.value == "v1+weigh+ship"  # version 1's fetch result, as version 2's load
    assert set(done.steps) == set(V2_STEPS)
    assert set(ran) == {("v1", "fetch", started.id), ("v2", "weigh", started.id),
                        ("v2", "ship", started.id)}  # load is fetch's record: never run
    assert [pids for pids in ran.values() if len(pids) != 1] == []
    assert ran[("v1", "fetch", started.id)] == [os.getpid()]
    assert {groups[pids[0]] for key, pids in ran.items() if key[0] == "v2"} == {
        workers.proc.pid}
    migrated = [e for e in done.history if e.kind == rf.EventKind.RUN_MIGRATED]
    assert len(migrated) == 1 and "1 -> 2" in migrated[0].detail, migrated
    assert all(line.endswith(" retries=0") for line in _deliveries(shared.log, started.id))
