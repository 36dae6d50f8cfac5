"""A zombie with a paused process: a real worker process running an inline map is stopped
(SIGSTOP) past its lock's TTL, another execution takes the run over and completes it, then the
process is resumed (SIGCONT). The zombie must start no new element and write nothing."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow.runtime.engine.map_slot_keys import slot_keys
from tests.helpers import until_lock_lapses
from tests.recovery.conftest import Child, Shared, until
from tests.workflows.durable import read_log, zfail, zmap

pytestmark = pytest.mark.slow

COUNT = 6


def _starts(log: Path, pid: int) -> list[int]:
    return [int(f[4]) for f in read_log(str(log)) if f[:2] == ["el", "start"] and int(f[2]) == pid]


async def _slots(storage: rf.Storage, run_id: str) -> list[list[bytes | None]]:
    return [await storage.load_elements(run_id, key, 0, COUNT + 4) for key in slot_keys("each")]


async def test_paused_process_past_its_lock_starts_no_element_and_writes_nothing(
        shared: Shared, spawn: Callable[..., Child], tmp_path: Path) -> None:
    log, marker = tmp_path / "elements.log", tmp_path / "marker"
    child = spawn("zmap", "zmap", shared.url, shared.namespace, str(log), str(marker),
                  str(COUNT))
    zombie = child.proc.pid
    await until(lambda: _starts(log, zombie) == [0, 1, 2], "element 2 to start", child=child)
    run_id = read_log(str(log))[0][3]
    os.kill(zombie, signal.SIGSTOP)  # paused mid-element: its lock keeper stops too
    try:
        await until_lock_lapses(shared.storage, run_id)
        await anyio.sleep(0.6)  # past stall_timeout since the run's last write
        marker.touch()
        report = await rf.sweep_once()  # a real second execution takes the run over
        assert report.recovered == [run_id]
        run = await zmap.wait(run_id, timeout=10)
        assert run.status is rf.Status.COMPLETED
        stored = await shared.storage.load_run(run_id)
        history = await shared.storage.history(run_id)
        slots = await _slots(shared.storage, run_id)
    finally:
        os.kill(zombie, signal.SIGCONT)
    await until(lambda: child.proc.poll() is not None, "the zombie to stop", child=child)

    assert _starts(log, zombie) == [0, 1, 2]  # nothing started after it came back
    assert "LockLost" in child.stderr, child.describe()  # it stopped: it no longer owns the run
    assert await shared.storage.load_run(run_id) == stored  # and wrote nothing
    assert await shared.storage.history(run_id) == history
    assert await _slots(shared.storage, run_id) == slots
    assert await shared.storage.lock_owner(run_id) is None
    values = (await zmap.get(run_id)).value
    assert values[:2] == [f"0 by {zombie}", f"1 by {zombie}"]
    assert values[2:] == [f"{i} by {os.getpid()}" for i in range(2, COUNT)]


def _compensates(log: Path) -> list[tuple[int, int]]:
    return [(int(f[2]), int(f[4])) for f in read_log(str(log)) if f[:2] == ["comp", "start"]]


async def test_paused_process_whose_element_then_fails_starts_no_compensate(
        shared: Shared, spawn: Callable[..., Child], tmp_path: Path) -> None:
    """The zombie's element body fails once its process goes on (it was re-run and compensated
    by the execution that took the run over): a lost lock starts no compensate either."""
    log, marker = tmp_path / "elements.log", tmp_path / "marker"
    child = spawn("zfail", "zfail", shared.url, shared.namespace, str(log), str(marker),
                  str(COUNT))
    zombie = child.proc.pid
    await until(lambda: _starts(log, zombie) == [0, 1, 2], "element 2 to start", child=child)
    run_id = read_log(str(log))[0][3]
    os.kill(zombie, signal.SIGSTOP)  # paused mid-element, before its body fails
    try:
        await until_lock_lapses(shared.storage, run_id)
        await anyio.sleep(0.6)  # past stall_timeout since the run's last write
        marker.touch()  # from now on element 2 fails, wherever it runs
        report = await rf.sweep_once()  # a real second execution takes the run over
        assert report.recovered == [run_id]
        run = await zfail.wait(run_id, timeout=10)
        assert run.status is rf.Status.FAILED
        assert _compensates(log) == [(os.getpid(), 2)]  # the taker compensated element 2
    finally:
        os.kill(zombie, signal.SIGCONT)
    await until(lambda: child.proc.poll() is not None, "the zombie to stop", child=child)

    assert _compensates(log) == [(os.getpid(), 2)], child.describe()  # and only the taker
    assert "LockLost" in child.stderr, child.describe()
