"""The `reactorflow` command as a subprocess against the suite's real Redis."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import anyio
import httpx
import pytest

import reactorflow as rf
from reactorflow.cli.notes import moment_utc
from tests.operate.conftest import ROOT, Shared, cli, environment
from tests.operate.flows import approval, orders, reminders, signoffs

pytestmark = pytest.mark.slow
APP = ("--app", "tests.operate.flows")


async def test_runs_list_and_show_as_json(shared: Shared) -> None:
    paused = await orders.run(item="tea", qty=2)
    failed = await orders.run(item="gin", fail=True)

    listed = cli(shared, "runs", "list", "--json")
    assert listed.code == 0, listed.err
    page = json.loads(listed.out)
    assert [r["id"] for r in page["runs"]] == [failed.id, paused.id]
    assert page["runs"][1]["waiting_on"] == ["approve"] and page["next_cursor"] is None
    only = json.loads(cli(shared, "runs", "list", "--status", "failed", "--json").out)
    assert [r["id"] for r in only["runs"]] == [failed.id]
    first = json.loads(cli(shared, "runs", "list", "--limit", "1", "--json").out)
    rest = json.loads(cli(shared, "runs", "list", "--cursor", first["next_cursor"],
                          "--json").out)
    assert [r["id"] for r in first["runs"] + rest["runs"]] == [failed.id, paused.id]

    shown = cli(shared, "runs", "show", paused.id, "--json")  # no --app: plain data
    run = json.loads(shown.out)
    assert set(run) == set(rf.Run.__struct_fields__)
    assert run["inputs"] == {"item": "tea", "qty": 2, "fail": False}
    assert run["steps"]["reserve"]["status"] == "completed"
    assert run["history"][0]["kind"] == "run.started"
    error = json.loads(cli(shared, "runs", "show", failed.id, "--json").out)["error"]
    assert error["step"] == "reserve" and error["message"] == "no stock for gin"


async def test_human_output_is_an_aligned_table_without_colour_when_piped(
        shared: Shared) -> None:
    runs = [await orders.run(item="tea"), await orders.run(item="gin", fail=True)]
    listed = cli(shared, "runs", "list")
    assert listed.code == 0 and "\x1b[" not in listed.out
    header, *rows = listed.out.splitlines()
    assert header.split() == ["RUN", "REACTOR", "VERSION", "STATUS", "CREATED", "UPDATED",
                              "NOTE"]
    status_at = header.index("STATUS")
    assert [row[status_at:].split()[0] for row in rows] == ["failed", "paused"]
    assert rows[1].rstrip().endswith("waiting on approve")
    shown = cli(shared, "runs", "show", runs[1].id)
    assert "\x1b[" not in shown.out
    assert "step 'reserve' failed: ValueError: no stock for gin" in shown.out
    assert any(line.split()[:2] == ["reserve", "failed"] for line in shown.out.splitlines())


async def test_runs_show_says_until_when_a_run_sleeps(shared: Shared) -> None:
    run = await reminders.run(order_id="A1")  # sleeps 2 d 3 h on the real clock
    wake = run.steps["cool_off"].wake_at
    assert wake is not None
    shown = cli(shared, "runs", "show", run.id)  # without --app: from the stored records
    assert shown.code == 0, shown.err
    row = next(line for line in shown.out.splitlines() if line.startswith("cool_off "))
    assert row.split()[:3] == ["cool_off", "waiting", "1"]
    assert row.rstrip().endswith(f"sleeping until {moment_utc(wake)} (in 2 d 3 h)")
    as_json = json.loads(cli(shared, "runs", "show", run.id, "--json").out)
    assert datetime.fromisoformat(as_json["steps"]["cool_off"]["wake_at"]) == wake


async def test_continue_undo_cancel_and_retry(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    done = cli(shared, "continue", paused.id, "approve", "--payload",
               json.dumps(approval()), "--json", *APP)
    assert done.code == 0, done.err
    assert json.loads(done.out)["status"] == "completed"
    assert json.loads(done.out)["value"] == "1xtea to Lyon"

    undone = cli(shared, "undo", paused.id, *APP, "--json")
    assert json.loads(undone.out)["status"] == "cancelled"

    other = await orders.run(item="gin")
    cancelled = cli(shared, "cancel", other.id, *APP)
    assert cancelled.code == 0 and "cancelled" in cancelled.out
    retried = cli(shared, "retry", other.id, *APP, "--json")
    assert retried.code == 0, retried.err
    new = json.loads(retried.out)
    assert new["retried_from"] == other.id and new["status"] == "paused"
    assert (await orders.get(new["id"])).inputs == (await orders.get(other.id)).inputs


async def test_payload_from_a_file_and_a_nested_error_in_one_line(shared: Shared,
                                                                  tmp_path: Path) -> None:
    paused = await orders.run(item="tea")
    bad = cli(shared, "continue", paused.id, "approve", "--payload",
              json.dumps(approval(amount=500)), *APP)
    assert bad.code == 1
    assert bad.err.splitlines()[0].startswith(
        f"error: invalid payload for interrupt 'approve' of run '{paused.id}': amount: "
        "Expected `int` <= 100")
    assert "Traceback" not in bad.err and len(bad.err.strip().splitlines()) == 2
    verbose = cli(shared, "continue", paused.id, "approve", "--payload",
                  json.dumps(approval(amount=500)), *APP, "-v")
    assert verbose.code == 1 and "Traceback (most recent call last)" in verbose.err
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(approval()))
    done = cli(shared, "continue", paused.id, "approve", "--payload", f"@{path}", *APP)
    assert done.code == 0 and "completed" in done.out


async def test_continue_check_sends_nothing_and_counts_no_attempt(shared: Shared) -> None:
    paused = await signoffs.run()  # its interrupt allows 2 attempts
    for _ in range(3):  # a typo checked three times: counted, it would have failed the run
        typo = cli(shared, "continue", paused.id, "sign", "--check", "--payload",
                   json.dumps({"approved": True, "bu": "ann"}), *APP)
        assert typo.code == 1
        assert typo.err.startswith(f"error: invalid payload for interrupt 'sign' of run "
                                   f"'{paused.id}': bu: an unknown field")
        assert "checked only: nothing was sent and no attempt" in typo.err
    good = cli(shared, "continue", paused.id, "sign", "--check", "--payload",
               json.dumps({"approved": True, "by": "ann"}), *APP)
    assert good.code == 0, good.err
    assert good.out.startswith(f"ok: run {paused.id} waits on sign and accepts this payload")
    as_json = cli(shared, "continue", paused.id, "sign", "--check", "--json", "--payload",
                  json.dumps({"approved": True, "by": "ann"}), *APP)
    assert json.loads(as_json.out)["payload"] == {"approved": True, "by": "ann", "tags": []}
    assert (await signoffs.get(paused.id)).status is rf.Status.PAUSED
    sent = cli(shared, "continue", paused.id, "sign", "--payload",
               json.dumps({"approved": True, "by": "ann"}), *APP, "--json")
    assert json.loads(sent.out)["value"] == "approved by ann"


async def test_cancel_stores_the_reason_given(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    cancelled = cli(shared, "cancel", paused.id, "--reason", "ordered twice", "--json", *APP)
    assert cancelled.code == 0, cancelled.err
    assert json.loads(cancelled.out)["cancel_reason"] == "ordered twice"
    assert (await orders.get(paused.id)).cancel_reason == "ordered twice"


@pytest.mark.parametrize(("args", "code", "message"), [
    (("runs", "show", "nope"), 1, "error: no run 'nope'"),
    (("cancel", "nope", *APP), 1, "error: no run 'nope'"),
    (("runs", "list", "--status", "stuck"), 2, "Invalid value for '--status'"),
    (("runs", "list", "--limit", "0"), 2, "Invalid value for '--limit'"),
    (("runs", "list", "--cursor", "zz"), 1, "not one this library returned"),
    (("continue", "x", "approve", "--payload", "{nope", *APP), 2, "not JSON"),
    (("continue", "x", "approve", "--payload", "@/nonexistent.json", *APP), 2, "cannot read"),
    (("runs", "list", "--app", "no_such_module"), 1, "cannot import app module"),
    (("graph", "tests.operate.flows"), 1, "no reactor 'tests.operate.flows'"),
    (("graph", "tests.operate.flows:approval"), 1, "is not an rf.Reactor"),
    (("sweep", "--interval", "0"), 2, "Invalid value for '--interval'"),
])
async def test_errors_are_one_line_with_a_non_zero_exit(shared: Shared, args: tuple[str, ...],
                                                        code: int, message: str) -> None:
    result = cli(shared, *args)
    assert result.code == code, result.err
    assert message in result.err
    assert "Traceback" not in result.err


async def test_a_run_whose_reactor_no_app_declares_is_refused_by_name(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    result = cli(shared, "cancel", paused.id)
    assert result.code == 1
    assert result.err.startswith(f"error: run '{paused.id}' belongs to reactor 'ops.orders', "
                                 "which this process does not declare")
    assert "--app" in result.err
    assert (await orders.get(paused.id)).status is rf.Status.PAUSED


def test_commands_refuse_without_shared_storage() -> None:
    for args in (("runs", "list"), ("sweep", "--once")):
        result = cli(None, *args)
        assert result.code == 1
        assert "no shared storage: set REACTORFLOW_REDIS_URL" in result.err
    result = cli(None, "runs", "list", "--namespace", "mine")
    assert result.code == 1
    assert "--namespace 'mine' needs a Redis: pass --redis-url" in result.err


def test_version_and_graph() -> None:
    version = cli(None, "--version")
    assert version.code == 0 and version.out.strip() == f"reactorflow {rf.__version__}"
    graph = cli(None, "graph", "tests.operate.flows:orders")
    assert graph.code == 0 and graph.out.startswith("flowchart")
    assert "approve" in graph.out


def _spawn(lane: Shared, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "reactorflow", *args], cwd=ROOT,
                            env=environment(lane),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
async def test_sweep_runs_once_and_stops_cleanly_on_ctrl_c(shared: Shared,
                                                          stop: signal.Signals) -> None:
    once = cli(shared, "sweep", "--once", *APP)
    assert once.code == 0 and once.out.startswith("sweep: recovered=0")
    proc = _spawn(shared, "sweep", "--interval", "0.2", *APP)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("sweep: ")  # it is looping
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 0
    assert "sweep: stopped" in err and "Traceback" not in err


async def test_worker_prints_a_banner(shared: Shared) -> None:
    proc = _spawn(shared, "worker", "--app", "tests.operate.flows", "--threads", "1")
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert banner.startswith("reactorflow worker: broker RedisBroker at 127.0.0.1:")
    assert "queue 'reactorflow'" in banner and "ops.orders" in banner


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_dashboard_serves_the_api_on_loopback(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    port = _free_port()
    proc = _spawn(shared, "dashboard", *APP, "--port", str(port), "--token", "t0k")
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        assert banner.startswith(f"reactorflow dashboard on http://127.0.0.1:{port}/ "
                                 "(token required)")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            with anyio.fail_after(30):
                while True:  # polling a subprocess's port: nothing to wait on
                    try:
                        response = await http.get("/api/runs",
                                                  headers={"Authorization": "Bearer t0k"})
                        break
                    except httpx.ConnectError:
                        await anyio.sleep(0.05)
            assert [r["id"] for r in response.json()["runs"]] == [paused.id]
            assert (await http.get("/api/runs")).status_code == 401
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def test_a_dashboard_open_to_other_machines_without_a_token_is_warned_about(
        shared: Shared) -> None:
    proc = _spawn(shared, "dashboard", "--host", "0.0.0.0", "--port", str(_free_port()))
    try:
        assert proc.stderr is not None
        assert "(read-only (no --token: every change is refused))" in proc.stderr.readline()
        assert proc.stderr.readline().startswith(
            "warning: 0.0.0.0 is reachable from other machines and there is no token")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_without_the_web_extra_the_dashboard_names_it() -> None:
    code = ("import sys; sys.modules['starlette'] = None; "
            "from reactorflow.cli import main; sys.exit(main(['dashboard']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment(None),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: the dashboard and HTTP API need the web extra: "
                                  "pip install 'reactorflow[web]'")
