"""`reactorflow schedules list|pause|resume|run-now|backfill` and `reactorflow scheduler` as
subprocesses against the suite's real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.storage.contract.values import ScheduleState
from tests.operate.conftest import ROOT, Shared, cli, environment
from tests.schedules.flows import Tick, minutely

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


BACKFILL = ("schedules", "backfill", KEY, "--from", "2026-01-01T00:00Z", "--to",
            "2026-01-01T00:03Z", *APP)


def _backfilled(out: str) -> list[tuple[str, str, str]]:
    """(tick, what, run id) of each progress line of `schedules backfill`."""
    rows = [line.split() for line in out.splitlines()]
    return [(row[1], row[2], row[4]) for row in rows]


async def test_backfill_starts_one_run_per_tick_and_twice_gives_the_same_runs(
        shared: Shared) -> None:
    first = cli(shared, *BACKFILL)
    assert first.code == 0, first.err
    done = _backfilled(first.out)
    ticks = [f"2026-01-01T00:0{minute}:00+00:00" for minute in range(4)]  # both ends included
    assert [(tick, what) for tick, what, _ in done] == [(tick, "started") for tick in ticks]
    assert first.out.splitlines()[0].startswith("[1/4] ")
    assert "4 tick(s)" in first.err and "4 started, 0 already started, 0 refused" in first.err
    runs = [await rf.get_run(run_id) for _, _, run_id in done]
    assert [run.inputs for run in runs] == [Tick(at=tick) for tick in ticks]  # the tick's
    assert {run.status for run in runs} == {rf.Status.RUNNING}  # dispatched, as a tick's

    again = cli(shared, *BACKFILL)
    assert again.code == 0, again.err
    assert _backfilled(again.out) == [(tick, "exists", run_id) for tick, _, run_id in done]
    assert "0 started, 4 already started" in again.err
    assert len((await minutely.list_runs(limit=100)).runs) == 4


async def test_backfill_reports_the_runs_the_scheduler_started(shared: Shared) -> None:
    await config.current_storage().schedule_load(KEY, round((time.time() - 150) * 1000))
    ran = cli(shared, "scheduler", "--once", *APP)
    assert ran.code == 0, ran.err
    by_scheduler = {line.split()[-1] for line in ran.out.splitlines()}
    assert len(by_scheduler) in (2, 3)  # the ticks of the last 150 s
    now = datetime.now(UTC).replace(microsecond=0)
    filled = cli(shared, "schedules", "backfill", KEY, "--from",
                 (now - timedelta(seconds=150)).isoformat(), "--to", now.isoformat(), *APP)
    assert filled.code == 0, filled.err
    rows = _backfilled(filled.out)
    assert {run_id for _, what, run_id in rows if what == "exists"} == by_scheduler


async def test_run_now_starts_a_run_with_the_schedules_inputs(shared: Shared) -> None:
    started = [cli(shared, "schedules", "run-now", KEY, "--json", *APP)
               for _ in range(2)]
    assert [result.code for result in started] == [0, 0], [r.err for r in started]
    runs = [json.loads(result.out) for result in started]
    assert runs[0]["id"] != runs[1]["id"]  # each call starts one
    assert runs[0]["status"] == "running" and runs[0]["inputs"]["at"].startswith("20")
    assert f"schedule {KEY}: started run {runs[0]['id']}" in started[0].err
    nightly = cli(shared, "schedules", "run-now", f"{minutely.name}:1", "--json", *APP)
    assert json.loads(nightly.out)["inputs"] == {"at": "nightly"}


@pytest.mark.parametrize(("args", "message"), [
    (("--from", "yesterday", "--to", "2026-01-01T00:03Z"), "'yesterday' is not an ISO time"),
    (("--from", "2026-01-02T00:00Z", "--to", "2026-01-01T00:00Z"), "is before --from"),
    (("--from", "2026-01-01T00:00Z", "--to", "2999-01-01T00:00Z"), "is in the future"),
    (("--from", "2026-01-01T00:00Z", "--to", "2026-01-02T00:00Z"),
     "the window holds 1441 ticks, more than 1000 at once"),
])
def test_backfill_refuses_a_bad_window_in_one_line(shared: Shared, args: tuple[str, ...],
                                                   message: str) -> None:
    result = cli(shared, "schedules", "backfill", KEY, *args, *APP)
    assert result.code == 2, result.err
    assert message in result.err and "Traceback" not in result.err


def test_backfill_names_the_declared_schedules_for_an_unknown_one(shared: Shared) -> None:
    result = cli(shared, "schedules", "backfill", "nope", "--from", "2026-01-01T00:00Z",
                 "--to", "2026-01-01T00:01Z", *APP)
    assert result.code == 1
    assert result.err.startswith(f"error: no schedule 'nope'; the declared schedules: {KEY}, ")
