"""The CLI finishes the job (issue 29): `--wait`, `runs watch`, refusals phrased as commands,
`graph` by reactor name, and `runs show` in graph order without `--app`; each through the real
command (a subprocess) against the suite's real Redis, with a real worker where a run needs
one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest

import reactorflow as rf
from tests.operate.conftest import Shared, cli
from tests.operate.flows import orders
from tests.operate.test_cli import _spawn
from tests.workflows.background import late

pytestmark = pytest.mark.slow
APP = ("--app", "tests.operate.flows")
OK = json.dumps({"ok": True})


@contextmanager
def running(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """`proc`, killed (its whole session) when the block ends: nothing here tests how it
    stops, and a worker's graceful stop takes seconds."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


async def read_until(proc: subprocess.Popen[str], text: str) -> list[str]:
    """The lines `proc` prints on stdout, up to the first that contains `text`."""
    assert proc.stdout is not None
    lines: list[str] = []
    with anyio.fail_after(60):
        while not lines or text not in lines[-1]:
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
            assert line, f"the process ended before printing {text!r}: {lines}"
            lines.append(line.rstrip("\n"))
    return lines


async def test_wait_times_out_in_one_line_then_watch_and_wait_follow_a_worker(
        shared: Shared) -> None:
    paused = await late.run()
    alone = cli(shared, "continue", paused.id, "approve", "--payload", OK, "--wait",
                "--timeout", "0.5", *APP)
    assert alone.code == 3, alone.err  # resumed in the background, and no worker runs
    assert alone.err.splitlines()[0] == (
        f"error: run '{paused.id}' is still running after waiting 0.5s: it was handed to a "
        "worker and no worker has taken it. Start one that imports the reactor's module and "
        "shares this broker (reactorflow worker <module>), then wait again")
    assert "Traceback" not in alone.err and alone.out == ""

    with running(_spawn(shared, "runs", "watch", paused.id, "--timeout", "60")) as watch:
        before = await read_until(watch, "run.resumed")  # the history stored so far
        assert [line.split()[1] for line in before] == [
            "run.started", "step.started", "step.completed", "interrupt.waiting", "run.paused",
            "run.resumed"]
        assert before[2].split()[2] == "before_pause"
        with running(_spawn(shared, "worker", *APP, "--threads", "1")):
            after = await read_until(watch, f"run {paused.id} is completed")
            assert watch.wait(30) == 0
            kinds = [line.split()[1] for line in after[:-1]]
            assert "run.completed" in kinds and "step.completed" in kinds
            assert not set(before) & set(after)  # each event once

            again = await late.run()
            waited = cli(shared, "continue", again.id, "approve", "--payload", OK, "--wait",
                         "--timeout", "60", "--json", *APP)
            assert waited.code == 0, waited.err
            assert json.loads(waited.out)["status"] == "completed"
            assert json.loads(waited.out)["value"] == "approved=True"


async def test_watch_ends_on_a_paused_run_saying_what_it_waits_for(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    watched = cli(shared, "runs", "watch", paused.id)
    assert watched.code == 0, watched.err
    *events, last = watched.out.splitlines()
    assert [line.split()[1] for line in events][-2:] == ["interrupt.waiting", "run.paused"]
    assert last == (f"run {paused.id} is paused: it waits for approve ('reactorflow continue "
                    f"{paused.id} STEP --payload JSON' resumes it)")
    missing = cli(shared, "runs", "watch", "nope")
    assert missing.code == 1 and missing.err.startswith("error: no run 'nope'")
    assert "Traceback" not in missing.err


async def test_wait_on_steering_commands_and_its_exit_codes(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    cancelled = cli(shared, "cancel", paused.id, "--reason", "dup", "--wait", "--timeout", "30",
                    "--json", *APP)
    assert cancelled.code == 0, cancelled.err
    assert json.loads(cancelled.out)["status"] == "cancelled"
    retried = cli(shared, "retry", paused.id, "--wait", "--json", *APP)
    assert retried.code == 0, retried.err
    assert json.loads(retried.out)["status"] == "paused"  # settled: it waits for approve
    undone = cli(shared, "undo", paused.id, "--wait", *APP)
    assert undone.code == 0 and "cancelled" in undone.out, undone.err
    lone = cli(shared, "undo", paused.id, "--timeout", "3", *APP)
    assert lone.code == 2 and "--timeout only applies with --wait" in lone.err


async def test_refusals_name_the_commands_to_type(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    refused = cli(shared, "retry", paused.id, *APP)
    assert refused.code == 1
    assert refused.err.splitlines()[0] == (
        f"error: cannot retry run '{paused.id}': it is paused. It waits for a payload: "
        f"'reactorflow continue {paused.id} STEP --payload JSON' resumes it; or "
        f"'reactorflow cancel {paused.id}' it, then retry it.")
    done = await orders.continue_(paused.id, step="approve", payload={
        "approved": True, "level": "low", "amount": 1,
        "ship_to": {"city": "Lyon", "zip": "69001"}})
    assert done.status is rf.Status.COMPLETED
    again = cli(shared, "cancel", paused.id, *APP)
    assert again.code == 1 and "(run_id)" not in again.err
    assert f"'reactorflow undo {paused.id}' rolls back its completed steps" in again.err
    with pytest.raises(rf.RunStateError, match=r"undo\(run_id\) rolls back"):  # Python's own
        await orders.cancel(paused.id)


async def test_runs_show_lists_every_step_in_graph_order_without_the_app(
        shared: Shared) -> None:
    paused = await orders.run(item="tea")
    shown = cli(shared, "runs", "show", paused.id)  # no --app: ops.orders is not declared
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    table = lines[lines.index(next(line for line in lines if line.startswith("STEP"))) + 1:]
    assert [line.split()[:2] for line in table] == [
        ["reserve", "completed"], ["approve", "waiting"], ["ship", "pending"]]
    as_json = json.loads(cli(shared, "runs", "show", paused.id, "--json").out)
    assert list(as_json["steps"]) == ["reserve", "approve", "ship"]
    with_app = json.loads(cli(shared, "runs", "show", paused.id, "--json", *APP).out)
    assert with_app["steps"] == as_json["steps"]


@pytest.mark.parametrize(("args", "code", "message"), [
    (("graph", "ops.orders", *APP), 0, "flowchart"),
    (("graph", "tests.operate.flows:orders"), 0, "flowchart"),
    (("graph", "ops.nope", *APP), 1,
     "error: no reactor 'ops.nope'; the declared reactors: ops.invoices, ops.orders, "
     "ops.payments, ops.reminders, ops.signoffs,"),
    (("graph", "ops.orders"), 1, "name the module that declares it with --app MODULE"),
    (("graph", "tests.operate.flows:approval"), 1,
     "error: tests.operate.flows:approval is not an rf.Reactor (it is a function); the "
     "reactors of tests.operate.flows: invoices, orders, payments, reminders, signoffs"),
    (("graph", "tests.operate.flows:"), 2, "module:variable"),
])
def test_graph_takes_the_reactor_name_and_lists_the_declared_ones(
        args: tuple[str, ...], code: int, message: str) -> None:
    result = cli(None, *args)
    assert result.code == code, result.err
    assert message in (result.out if code == 0 else result.err)
    assert "Traceback" not in result.err and "NoneType" not in result.err
