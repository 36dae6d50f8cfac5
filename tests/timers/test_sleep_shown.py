"""A sleeping step is shown wherever a run is: `rf.StepState.wake_at`, the HTTP API's run JSON,
and `reactorflow runs show`'s "sleeping until 2026-12-04 10:00 UTC (in 2 d 3 h)" (api.md §12),
on both backends under the fake clock; and every field of `rf.StepState` is shown by the CLI
and read by the dashboard's steps table."""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

import reactorflow as rf
from reactorflow.cli.notes import span, step_note, until
from reactorflow.cli.output import show_run
from reactorflow.testing import Environment
from reactorflow.web import create_app
from tests.operate.flows import SLEEPS, reminders

DASHBOARD_JS = Path(rf.__file__).parent / "web" / "static" / "dashboard.js"
TOKEN = "sleep-token"


@pytest.fixture(params=["rf_env", "rf_redis_env"])
def env(request: pytest.FixtureRequest) -> Environment:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


async def _on_the_hour(env: Environment) -> float:
    """Move the fake clock to the next whole hour (a deadline then falls on a whole minute)."""
    start = math.ceil(env.clock.now() / 3600) * 3600.0
    await env.clock.advance_to(start)
    return start


def _steps_table(out: str) -> dict[str, str]:
    """`runs show`'s steps table: each step's row by its key."""
    rows = out.split("\nSTEP ", 1)[1].splitlines()[1:]
    return {row.split()[0]: row for row in rows if row.strip()}


SPANS = [
    (0, "0 s"), (0.4, "0 s"), (42, "42 s"), (59.4, "59 s"), (59.6, "1 min"), (60, "1 min"),
    (250, "4 min 10 s"), (3599.6, "1 h"), (3600 + 5 * 60, "1 h 5 min"),
    (3 * 3600 + 29, "3 h"), (23 * 3600 + 59 * 60 + 29, "23 h 59 min"),
    (23 * 3600 + 59 * 60 + 31, "1 d"), (86_400, "1 d"), (2 * 86_400 + 3 * 3600, "2 d 3 h"),
    (2 * 86_400 + 3 * 3600 - 1, "2 d 3 h"), (2 * 86_400 + 23 * 3600 + 31 * 60, "3 d"),
    (400 * 86_400, "400 d"), (-90, "1 min 30 s"), (0.5, "1 s"), (89.5, "1 min 30 s"),
]
"""Durations and how they read, on the CLI and on the dashboard alike (tests/browser)."""


@pytest.mark.parametrize(("seconds", "words"), SPANS)
def test_a_span_reads_in_its_two_largest_units(seconds: float, words: str) -> None:
    assert span(seconds) == words


def test_until_says_how_far_and_whether_it_is_overdue() -> None:
    at = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    assert until(at, at.timestamp() - 7_200) == "in 2 h"
    assert until(at, at.timestamp() - 0.3) == "due now"
    assert until(at, at.timestamp() + 3) == "due 3 s ago"  # its timer has not fired yet


async def test_runs_show_says_until_when_a_step_sleeps(env: Environment,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    start = await _on_the_hour(env)
    wake = datetime.fromtimestamp(start + SLEEPS.total_seconds(), UTC)
    day = wake.strftime("%Y-%m-%d %H:%M")
    run = await reminders.run(order_id="A1")
    assert run.steps["cool_off"].wake_at == wake

    show_run(await reminders.get(run.id), as_json=False)
    rows = _steps_table(capsys.readouterr().out)
    assert rows["cool_off"].split()[1] == "waiting"
    assert rows["cool_off"].endswith(f"sleeping until {day} UTC (in 2 d 3 h)")
    assert "sleeping" not in rows["dispatch_parcel"] + rows["remind"]

    await env.clock.advance(2 * 86_400)
    show_run(await reminders.get(run.id), as_json=False)
    assert _steps_table(capsys.readouterr().out)["cool_off"].endswith(
        f"sleeping until {day} UTC (in 3 h)")
    await env.clock.advance(3 * 3600 - 30)
    show_run(await reminders.get(run.id), as_json=False)
    assert _steps_table(capsys.readouterr().out)["cool_off"].endswith("(in 30 s)")

    await env.clock.advance(30)
    await env.drain()
    done = await reminders.get(run.id)
    assert done.status is rf.Status.COMPLETED
    show_run(done, as_json=False)
    woke = _steps_table(capsys.readouterr().out)["cool_off"]
    assert woke.split()[1] == "completed" and "sleeping" not in woke


@pytest.fixture
async def client(env: Environment) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        yield http


async def test_the_api_gives_a_sleeping_steps_wake_at(env: Environment,
                                                      client: httpx.AsyncClient) -> None:
    start = await _on_the_hour(env)
    run = await reminders.run(order_id="B2")
    body = (await client.get(f"/api/runs/{run.id}")).json()
    steps = body["steps"]
    assert body["status"] == "running" and body["waiting_on"] == []
    assert steps["cool_off"]["status"] == "waiting"
    wake = datetime.fromtimestamp(start + SLEEPS.total_seconds(), UTC)
    assert steps["cool_off"]["wake_at"] == wake.strftime("%Y-%m-%dT%H:%M:%SZ")  # ISO 8601, UTC
    assert datetime.fromisoformat(steps["cool_off"]["wake_at"]) == wake
    assert steps["dispatch_parcel"]["wake_at"] is None and steps["remind"]["wake_at"] is None
    assert set(steps["cool_off"]) == set(rf.StepState.__struct_fields__)

    await env.clock.advance(SLEEPS.total_seconds())
    await env.drain()
    woke = (await client.get(f"/api/runs/{run.id}")).json()["steps"]["cool_off"]
    assert woke["status"] == "completed" and woke["wake_at"] is None


# Each field of rf.StepState set to a value the CLI must show (on top of BASE).
BASE = rf.StepState(rf.StepStatus.WAITING, attempts=1, started_at=1_000.0, finished_at=1_001.0)
SHOWN = {
    "status": rf.StepStatus.COMPLETED,
    "attempts": 3,
    "started_at": 1_000.5,
    "finished_at": 1_003.0,
    "error": "ValueError: no stock",
    "gate": "lock 'account:A1'",
    "wake_at": datetime(2026, 12, 4, 10, 0, tzinfo=UTC),
}


def test_every_step_state_field_is_shown_by_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """A new `rf.StepState` field fails here until `runs show` shows it (and the dashboard's
    steps table reads it): a step's state is never only in `--json`."""
    fields = set(rf.StepState.__struct_fields__)
    assert set(SHOWN) == fields, (
        f"decide how `reactorflow runs show` and the dashboard show StepState."
        f"{sorted(fields - set(SHOWN))}, then list the field here")
    now = datetime(2026, 12, 2, 7, 0, tzinfo=UTC).timestamp()

    def row(state: rf.StepState) -> str:
        show_run(rf.Run(id="r1", reactor="shown", status=rf.Status.RUNNING,
                        steps={"s": state}), as_json=False)
        return _steps_table(capsys.readouterr().out)["s"]

    plain = row(BASE)
    for name, value in SHOWN.items():
        changed = rf.StepState(**{**{f: getattr(BASE, f) for f in fields}, name: value})
        assert row(changed) != plain, f"runs show does not show StepState.{name}"
    assert step_note(rf.StepState(rf.StepStatus.PENDING, gate="lock 'account:A1'"), now) == (
        "waiting for lock 'account:A1'")

    script = DASHBOARD_JS.read_text(encoding="utf-8")
    steps_table = script.split("function renderSteps(", 1)[1].split("\n  function ", 1)[0]
    notes = script.split("function stepNote(", 1)[1].split("\n  }", 1)[0]
    for name in fields:
        assert re.search(rf"\bs\.{name}\b", steps_table + notes), (
            f"the dashboard's steps table does not read StepState.{name}")
