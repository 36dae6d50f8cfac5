"""Crash and recovery with real processes on Redis: a SIGKILLed execution's run is recovered
by the sweeper from its last checkpoint; a live one is left alone; a pause taken by one process
is continued by another."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from tests.recovery.conftest import Child, Shared, until
from tests.workflows.durable import approval, chain, count, read_log

pytestmark = pytest.mark.slow


CLUSTER_LANE = True  # also runs on the suite's Redis Cluster (tests/recovery/conftest.py)


def _lines(log: Path) -> list[list[str]]:
    return read_log(str(log))


def _run_id_of(log: Path) -> str:
    ids = {fields[3] for fields in _lines(log)}
    assert len(ids) == 1, ids
    return ids.pop()


async def _start_chain_until_s3(spawn: Callable[..., Child], shared: Shared,
                                tmp_path: Path) -> tuple[Child, Path, Path, str]:
    log, marker = tmp_path / "steps.log", tmp_path / "marker"
    child = spawn("chain", "chain", shared.url, shared.namespace, str(log), str(marker))
    await until(lambda: count(_lines(log), "s3", "start") == 1, "step s3 to start",
                child=child)
    return child, log, marker, _run_id_of(log)


async def _lock_expired(storage: rf.Storage, run_id: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while await storage.lock_owner(run_id) is not None:
        assert time.monotonic() < deadline, "the dead process's lock did not expire"
        await anyio.sleep(0.05)


async def test_killed_run_is_recovered_from_its_last_checkpoint(
        shared: Shared, spawn: Callable[..., Child], tmp_path: Path) -> None:
    child, log, marker, run_id = await _start_chain_until_s3(spawn, shared, tmp_path)
    child_pid = child.proc.pid
    os.kill(child_pid, signal.SIGKILL)
    child.proc.wait(5)

    stalled = await chain.get(run_id)
    assert stalled.status is rf.Status.RUNNING
    assert stalled.steps["s2"].status == "completed"
    assert stalled.steps["s3"].status == "pending"  # in flight when the process died
    await anyio.sleep(1.1)  # past lock_ttl (1 s) and stall_timeout (0.5 s)
    await _lock_expired(shared.storage, run_id)

    marker.touch()  # the re-run of s3 does not block
    report = await rf.sweep_once()
    assert report.recovered == [run_id]
    assert report.expired == report.failed == report.skipped == report.enqueued == []

    run = await chain.wait(run_id, timeout=10)
    assert run.status is rf.Status.COMPLETED
    assert run.value == "chain done at 4"

    lines = _lines(log)
    assert count(lines, "s1", "start") == count(lines, "s1", "done") == 1
    assert count(lines, "s2", "start") == count(lines, "s2", "done") == 1
    assert count(lines, "s3", "start") == 2
    assert count(lines, "s3", "done") == 1
    assert count(lines, "s4", "start") == count(lines, "s4", "done") == 1
    s3_starts = [fields for fields in lines if fields[:2] == ["s3", "start"]]
    assert [int(fields[2]) for fields in s3_starts] == [child_pid, os.getpid()]
    keys = {fields[4] for fields in lines if fields[0] == "s3"}
    assert keys == {f"{run_id}:s3"}  # the same idempotency key in both attempts
    for step in ("s1", "s2"):  # completed before the crash: only ever in the dead process
        assert {int(f[2]) for f in lines if f[0] == step} == {child_pid}

    again = await rf.sweep_once()
    assert run_id not in again.recovered + again.failed + again.expired


async def test_run_whose_lock_is_still_held_is_not_recovered(
        shared: Shared, spawn: Callable[..., Child], tmp_path: Path) -> None:
    child, log, _marker, run_id = await _start_chain_until_s3(spawn, shared, tmp_path)
    # Longer than lock_ttl and stall_timeout: only the keeper's extensions keep the lock alive,
    # and the run's last write (s2's checkpoint) is older than stall_timeout.
    await anyio.sleep(1.5)
    assert child.proc.poll() is None, child.describe()
    assert await shared.storage.lock_owner(run_id) is not None
    head = await shared.storage.load_head(run_id)
    assert head is not None and time.time() - head.touched_at >= 0.5

    report = await rf.sweep_once()
    assert run_id not in report.recovered + report.failed + report.expired + report.skipped
    await anyio.sleep(0.2)
    lines = _lines(log)
    assert count(lines, "s3", "start") == 1  # not started a second time
    assert {int(f[2]) for f in lines} == {child.proc.pid}
    assert (await chain.get(run_id)).status is rf.Status.RUNNING
    assert child.proc.poll() is None, child.describe()


async def test_pause_in_one_process_continue_in_another(
        shared: Shared, spawn: Callable[..., Child], tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    first = spawn("pause", "pause", shared.url, shared.namespace, str(log))
    paused = json.loads((await first.finish()).splitlines()[-1])
    assert paused["status"] == "paused" and paused["waiting_on"] == ["decide"]
    run_id = paused["id"]
    assert await shared.storage.lock_owner(run_id) is None  # released on exit

    second = spawn("continue", "continue", shared.url, shared.namespace, run_id)
    done = json.loads((await second.finish()).splitlines()[-1])
    assert done["id"] == run_id and done["status"] == "completed"

    run = await approval.get(run_id)
    assert run.status is rf.Status.COMPLETED
    assert run.value == "prepared, approved=True by process-2"
    lines = _lines(log)
    for step in ("before", "decide", "after"):
        assert count(lines, step, "start") == count(lines, step, "done") == 1, lines
    pids = {fields[0]: int(fields[2]) for fields in lines}
    assert pids["before"] == first.proc.pid
    assert pids["decide"] == pids["after"] == second.proc.pid
