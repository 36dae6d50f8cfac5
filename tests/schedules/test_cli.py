"""`reactorflow schedules list|pause|resume` and `reactorflow scheduler` as subprocesses
against the suite's real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from reactorflow import config
from reactorflow.storage.contract.values import ScheduleState
from tests.operate.conftest import ROOT, Shared, cli, environment
from tests.schedules.flows import minutely

pytestmark = pytest.mark.slow
APP = ("--app", "tests.schedules.flows")
KEY = "sched-minutely:every-minute"


async def state() -> ScheduleState | None:
    return await config.current_storage().schedule_load(KEY, None)


async def test_list_pause_and_resume(shared: Shared) -> None:
    listed = cli(shared, "schedules", "list", "--json", *APP)
    assert listed.code == 0, listed.err
    rows = {row["schedule"]: row for row in json.loads(listed.out)}
    assert set(rows) == {KEY, "sched-minutely:1"}
    assert rows["sched-minutely:1"]["timezone"] == "Europe/Madrid"
    assert rows["sched-minutely:1"]["next"].endswith(("T02:00:00+01:00", "T02:00:00+02:00"))
    assert rows[KEY]["paused"] is False and rows[KEY]["cron"] == "* * * * *"

    paused = cli(shared, "schedules", "pause", KEY, *APP)
    assert paused.code == 0 and "paused" in paused.out, paused.err
    found = await state()
    assert found is not None and found.paused
    header, *lines = cli(shared, "schedules", "list", *APP).out.splitlines()
    assert header.split()[:3] == ["SCHEDULE", "CRON", "TIMEZONE"]
    assert any(line.startswith(KEY) and " yes " in line for line in lines)
    assert cli(shared, "schedules", "resume", KEY, *APP).code == 0
    found = await state()
    assert found is not None and not found.paused

    unknown = cli(shared, "schedules", "pause", "nope", *APP)
    assert unknown.code != 0 and "no schedule 'nope'" in unknown.err


async def test_two_scheduler_processes_start_one_run_per_tick(shared: Shared) -> None:
    # the schedule was last handled five minutes (and some) ago: five ticks are due
    await config.current_storage().schedule_load(KEY, round((time.time() - 330) * 1000))
    command = [sys.executable, "-m", "reactorflow", "scheduler", "--once", *APP]
    procs = [subprocess.Popen(command, cwd=ROOT, env=environment(shared), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    lines = [line for out, _ in outputs for line in out.splitlines()]
    page = await minutely.list_runs(limit=100)
    assert len(lines) == len(page.runs)  # every run started is printed once, by its starter
    assert len(page.runs) in (5, 6)  # the five missed ticks (a sixth if a minute turned)
    ticks = sorted(run.inputs.at for run in [await minutely.get(r.id) for r in page.runs])
    assert len(set(ticks)) == len(ticks)
