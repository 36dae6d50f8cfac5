"""A `reactorflow scheduler` process killed (SIGKILL) between claiming a tick and starting its
run, on the suite's real Redis: the next scheduler process finishes the tick, with exactly one
run for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import anyio
import pytest

from reactorflow import config
from tests.operate.conftest import ROOT, Shared, environment
from tests.schedules.hanging import HANG_ENV, KEY, killed
from tests.workflows.background import LOCK_TTL_ENV

pytestmark = pytest.mark.slow
COMMAND = [sys.executable, "-m", "reactorflow", "scheduler", "--app", "tests.schedules.hanging"]


async def until(check: Callable[[], bool], what: str) -> None:
    with anyio.fail_after(60):
        while not check():
            await anyio.sleep(0.02)  # condition polling, not a timing assumption
    assert check(), what


async def test_a_scheduler_killed_after_its_claim_leaves_the_tick_to_another(
        shared: Shared, tmp_path: Path) -> None:
    storage = config.current_storage()
    # the schedule was last handled two minutes (and some) ago: a tick is due
    await storage.schedule_load(KEY, round((time.time() - 150) * 1000))
    marker = tmp_path / "claimed"
    env = {**environment(shared), LOCK_TTL_ENV: "1", HANG_ENV: str(marker)}
    proc = subprocess.Popen([*COMMAND, "--once"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        await until(lambda: (marker.exists() and marker.read_text() != "") or
                    proc.poll() is not None, "the scheduler claimed a tick")
        assert proc.poll() is None, proc.communicate()  # it hangs after its claim
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    claimed = int(marker.read_text())
    assert (await killed.list_runs()).runs == []  # killed before it started the run
    state = await storage.schedule_load(KEY, None)
    assert state is not None and [tick for tick, _ in state.pending] == [claimed]
    lease = state.pending[0][1]
    await until(lambda: time.time() * 1000 > lease, "the claim's lease expired")

    survivor = subprocess.run([*COMMAND, "--once"], cwd=ROOT,
                              env={**environment(shared), LOCK_TTL_ENV: "1"},
                              capture_output=True, text=True, timeout=60, check=False)
    assert survivor.returncode == 0, survivor.stderr
    page = await killed.list_runs(limit=100)
    ticks = [(await killed.get(run.id)).inputs.at for run in page.runs]
    instants = [round(datetime.fromisoformat(at).timestamp() * 1000) for at in ticks]
    assert instants.count(claimed) == 1, ticks  # exactly one run for the tick
    assert len(instants) == len(set(instants))  # (a minute may have turned: one run more)
    assert "reactorflow.schedule.recovered" in survivor.stderr
    state = await storage.schedule_load(KEY, None)
    assert state is not None and state.pending == ()
