"""The CLI's side of audit and roles (api.md §16): an action taken with `reactorflow` is
recorded as done by the OS user at the host; `reactorflow dashboard --tokens FILE` refuses a bad
token file in one line naming the entry, never printing a token."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

import reactorflow as rf
from reactorflow.audit import operator
from tests.operate.conftest import Shared, cli
from tests.operate.flows import Bill, invoices, orders, reminders

pytestmark = pytest.mark.slow
APP = ("--app", "tests.operate.flows")


async def test_cli_actions_are_recorded_as_done_by_the_os_user(shared: Shared) -> None:
    me = operator()
    assert me.endswith("@" + socket.gethostname())
    run = await orders.run(item="tea")
    assert cli(shared, "cancel", run.id, *APP).code == 0
    sleeping = await reminders.run(order_id="A1")
    assert cli(shared, "runs", "pause", sleeping.id, *APP).code == 0
    resumed = cli(shared, "runs", "resume", sleeping.id, *APP, "--json")
    assert resumed.code == 0, resumed.err
    held = await invoices.run(customer="ACME")
    skipped = cli(shared, "runs", "skip-step", held.id, "bill", "--result",
                  json.dumps({"ref": "B-3", "amount": 2.0}), *APP)
    assert skipped.code == 0, skipped.err
    assert [(e.kind, e.actor) for e in (await orders.get(run.id)).history if e.actor] == [
        ("run.cancelled", me)]
    assert [(e["kind"], e["actor"]) for e in json.loads(resumed.out)["history"] if e["actor"]] == [
        ("run.paused", me), ("run.resumed", me)]
    done = await invoices.get(held.id)
    assert done.steps["bill"].result == Bill("B-3", 2.0)
    assert [(e.kind, e.actor) for e in done.history if e.actor] == [("run.repaired", me)]
    shown = cli(shared, "runs", "watch", run.id)  # its history, one event a line
    assert any(line.split()[1:2] == ["run.cancelled"] and line.rstrip().endswith(f"by {me}")
               for line in shown.out.splitlines()), shown.out
    assert (await orders.get(run.id)).status is rf.Status.CANCELLED


@pytest.mark.parametrize(("content", "problem"), [
    ('{"viewer": {"role": "admin", "token": "SECRET-1"}}',
     "entry 'viewer': role 'admin' is not one of read, operate"),
    ('{"viewer": {"role": "read"}}',
     "entry 'viewer': no token: give token (the token's text) or sha256"),
    ('{"viewer": {"role": "read", "token": "SECRET-1", "sha256": "' + "a" * 64 + '"}}',
     "entry 'viewer': give token (the token's text) or sha256 (its SHA-256 hex digest), "
     "not both"),
    ('{"viewer": {"role": "read", "token": "SECRET-1"}, '
     '"viewer": {"role": "operate", "token": "SECRET-2"}}',
     "entry 'viewer': the name is given twice"),
    ('{"viewer": {"role": "read", "token": "SECRET-1"}, '
     '"ops": {"role": "operate", "token": "SECRET-1"}}',
     "entry 'ops': the same token as entry 'viewer'"),
    ('{"viewer": SECRET-1}', "is not JSON: Expecting value at line 1 column 12"),
])
def test_a_bad_token_file_is_one_line_naming_the_entry(
        tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content, encoding="utf-8")
    result = cli(None, "dashboard", "--tokens", str(path), "--port", "0")
    assert result.code == 1
    first, *rest = result.err.splitlines()
    assert first.startswith(f"error: token file {str(path)!r}: {problem}")
    assert rest == ["(run again with -v for the traceback)"]
    assert "SECRET" not in result.err + result.out
