"""The bulk forms of `reactorflow runs cancel|retry|...` as a subprocess against the suite's
real Redis: filter options instead of a RUN_ID select the runs; `--dry-run` lists them and
writes nothing; without `--yes` it asks; `--json` reports each outcome; exit status 1 when
one refused, 2 for no filter or a malformed `--since`; the single-run forms are unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import anyio
import pytest

import reactorflow as rf
from tests.operate.conftest import ROOT, Shared, cli, environment
from tests.operate.flows import orders

pytestmark = pytest.mark.slow
APP = ("--app", "tests.operate.flows")


async def _status(run: rf.Run) -> str:
    return (await orders.get(run.id)).status.value


async def test_bulk_cancel_by_filter_reports_each_run(shared: Shared) -> None:
    paused = [await orders.run(item=f"p{n}") for n in range(3)]
    failed = await orders.run(item="gin", fail=True)

    dry = cli(shared, "runs", "cancel", "--reactor", "ops.orders", "--dry-run", *APP)
    assert dry.code == 0, dry.err
    assert "4 run(s) match" in dry.out and all(r.id in dry.out for r in paused)
    assert [await _status(r) for r in paused] == ["paused"] * 3

    done = cli(shared, "runs", "cancel", "--reactor", "ops.orders", "--since", "1h", "--yes",
               "--json", *APP)
    assert done.code == 1, done.err  # one refused
    body = json.loads(done.out)
    assert body["matched"] == 4
    by_id = {r["id"]: r for r in body["runs"]}
    assert by_id[failed.id]["ok"] is False and "cannot cancel" in by_id[failed.id]["error"]
    assert all(by_id[r.id]["ok"] and by_id[r.id]["status"] == "cancelled" for r in paused)
    assert [await _status(r) for r in paused] == ["cancelled"] * 3

    again = cli(shared, "runs", "cancel", "--status", "cancelled", "--yes", *APP)
    assert again.code == 0, again.err
    assert "3 ok, 0 refused" in again.out and "cancelled already" in again.out


async def test_without_yes_it_asks_and_a_no_changes_nothing(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    proc = subprocess.run([sys.executable, "-m", "reactorflow", "runs", "cancel", "--status",
                           "paused", *APP], cwd=ROOT, env=environment(shared), input="n\n",
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Cancel 1 run(s)?" in proc.stderr and "nothing was done" in proc.stderr
    assert await _status(paused) == "paused"


async def test_bulk_retry_twice_retries_once(shared: Shared) -> None:
    failed = await orders.run(item="gin", fail=True)
    await anyio.sleep(0.01)  # the retries are created after --until: not selected
    until = datetime.now(UTC).isoformat()
    first = cli(shared, "runs", "retry", "--status", "failed", "--until", until, "--yes",
                "--json", *APP)
    assert first.code == 0, first.err
    [outcome] = json.loads(first.out)["runs"]
    assert outcome["id"] == failed.id and outcome["retried_as"]
    second = cli(shared, "runs", "retry", "--status", "failed", "--until", until, "--yes",
                 "--json", *APP)
    assert second.code == 0, second.err
    outcomes = {r["id"]: r for r in json.loads(second.out)["runs"]}
    assert outcomes[failed.id]["retried_as"] == outcome["retried_as"]
    assert outcomes[failed.id]["note"].startswith("retried already")


async def test_bad_selections_exit_2_and_the_single_form_still_works(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    empty = cli(shared, "runs", "cancel", "--dry-run", *APP)  # no RUN_ID and no filter
    assert empty.code == 2 and "needs a filter" in empty.err and "--all" in empty.err
    refused = cli(shared, "runs", "cancel", "--all", "--reactor", "", "--yes", *APP)
    assert refused.code == 2 and "reactor" in refused.err
    since = cli(shared, "runs", "resume", "--status", "paused", "--since", "2x", *APP)
    assert since.code == 2 and "since='2x'" in since.err
    step = cli(shared, "runs", "retry-step", "--status", "held", "--yes", *APP)
    assert step.code == 2 and "--step" in step.err
    one = cli(shared, "runs", "cancel", paused.id, "--json", *APP)
    assert one.code == 0, one.err
    assert json.loads(one.out)["status"] == "cancelled"
