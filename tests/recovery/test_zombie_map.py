"""A zombie with a paused process: a real worker process running an inline map is stopped
(SIGSTOP) past its lock's TTL, another execution takes the run over and completes it, then the
process is resumed (SIGCONT). The zombie must start no new element and write nothing."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest

import reactorflow as rf
from reactorflow.runtime.engine.map_slot_keys import slot_keys
from tests.helpers import until_lock_lapses
from tests.recovery.conftest import Child, Shared, until
from tests.workflows.durable import read_log, zmap

pytestmark = pytest.mark.slow

COUNT = 6


def _starts(log: Path, pid: int) -> list[int]:
    return [int(f[4]) for f in read_log(str(log)) if f[:2] == ["el", "start"] and int(f[2]) == pid]


async def _slots(storage: rf.Storage, run_id: str) -> list[list[bytes | None]]:
    return [await storage.load_elements(run_id, key, 0, COUNT + 4) for key in slot_keys("each")]


class Zombie(NamedTuple):
    """A run taken over from a paused (SIGSTOPped) process, and what storage held then."""

    child: Child
    run_id: str
    run: rf.Run
    stored: Any
    history: list[bytes]
    slots: list[list[bytes | None]]


async def _take_over(shared: Shared, spawn: Callable[..., Child], log: Path, marker: Path,
                     *extra: str) -> Zombie:
    """Run `zmap` in a subprocess, pause it mid-element 2 past its lock, let a real second
    execution (the sweeper's) take the run over and finish it, then resume the process."""
    child = spawn("zmap", "zmap", shared.url, shared.namespace, str(log), str(marker),
                  str(COUNT), *extra)
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
        taken = Zombie(child, run_id, run, await shared.storage.load_run(run_id),
                       await shared.storage.history(run_id), await _slots(shared.storage, run_id))
        compensated = _compensates(log)
    finally:
        os.kill(zombie, signal.SIGCONT)
    await until(lambda: child.proc.poll() is not None, "the zombie to stop", child=child)
    assert _compensates(log) == compensated, child.describe()  # the zombie compensated nothing
    assert "LockLost" in child.stderr, child.describe()  # it stopped: it no longer owns the run
    return taken


def _compensates(log: Path) -> list[tuple[int, int]]:
    return [(int(f[2]), int(f[4])) for f in read_log(str(log)) if f[:2] == ["comp", "start"]]


async def test_paused_process_past_its_lock_starts_no_element_and_writes_nothing(
        shared: Shared, spawn: Callable[..., Child], tmp_path: Path) -> None:
    log, marker = tmp_path / "elements.log", tmp_path / "marker"
    taken = await _take_over(shared, spawn, log, marker)
    zombie = taken.child.proc.pid
    assert taken.run.status is rf.Status.COMPLETED
    assert _starts(log, zombie) == [0, 1, 2]  # nothing started after it came back
    assert await shared.storage.load_run(taken.run_id) == taken.stored  # and wrote nothing
    assert await shared.storage.history(taken.run_id) == taken.history
    assert await _slots(shared.storage, taken.run_id) == taken.slots
    assert await shared.storage.lock_owner(taken.run_id) is None
    values = (await zmap.get(taken.run_id)).value
    assert values[:2] == [f"0 by {zombie}", f"1 by {zombie}"]
    assert values[2:] == [f"{i} by {os.getpid()}" for i in range(2, COUNT)]


async def test_paused_process_whose_element_then_fails_starts_no_compensate(
        shared: Shared, spawn: Callable[..., Child], tmp_path: Path) -> None:
    """The zombie's element body fails once its process goes on (it was re-run and compensated
    by the execution that took the run over): a lost lock starts no compensate either."""
    log, marker = tmp_path / "elements.log", tmp_path / "marker"
    taken = await _take_over(shared, spawn, log, marker, "fail")
    assert taken.run.status is rf.Status.FAILED
    assert _compensates(log) == [(os.getpid(), 2)]  # by the taker, once
