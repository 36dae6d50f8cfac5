"""Held runs on the command line, as a subprocess against the suite's real Redis: listed by
`runs list --status held`, repaired by `runs retry-step` (after the fix is "deployed": the
subprocess's environment) and `runs skip-step --result JSON|@file` (validated), each refusal one
line naming the run's status and the commands it allows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import reactorflow as rf
from tests.operate.conftest import Shared, cli
from tests.operate.flows import BILLING_FIXED_ENV, Bill, invoices, orders, reminders

pytestmark = pytest.mark.slow
APP = ("--app", "tests.operate.flows")


async def _held(customer: str = "ACME") -> rf.Run:
    run = await invoices.run(customer=customer)
    assert run.status is rf.Status.HELD and run.error is not None
    assert run.error.step == "bill"
    return run


async def test_held_runs_are_listed_by_status_and_retried_after_the_fix(
        shared: Shared, monkeypatch: pytest.MonkeyPatch) -> None:
    held = await _held()
    other = await orders.run(item="tea")  # paused: not held
    listed = cli(shared, "runs", "list", "--status", "held", "--json")
    assert listed.code == 0, listed.err
    assert [r["id"] for r in json.loads(listed.out)["runs"]] == [held.id]
    table = cli(shared, "runs", "list", "--status", "held")
    assert held.id in table.out and other.id not in table.out
    assert "bill" in table.out and "rejected the request format" in table.out

    again = cli(shared, "runs", "retry-step", held.id, "bill", *APP, "--json")  # not fixed yet
    assert again.code == 0, again.err
    assert json.loads(again.out)["status"] == "held"  # it failed again: held again

    monkeypatch.setenv(BILLING_FIXED_ENV, "1")  # the fix is deployed (in the CLI's process)
    done = cli(shared, "runs", "retry-step", held.id, "bill", "--wait", "--timeout", "30",
               *APP, "--json")
    assert done.code == 0, done.err
    run = json.loads(done.out)
    assert run["id"] == held.id and run["status"] == "completed"
    assert run["value"] == "receipt B-1 for 12.5"
    assert (await invoices.get(held.id)).steps["draft"].attempts == 1  # kept, not re-run


async def test_skip_step_validates_the_result_and_reads_it_from_a_file(
        shared: Shared, tmp_path: Path) -> None:
    held = await _held()
    wrong = cli(shared, "runs", "skip-step", held.id, "bill", "--result", '{"ref": "M-7"}', *APP)
    assert wrong.code == 1 and "Traceback" not in wrong.err
    first = wrong.err.splitlines()[0]
    assert first.startswith(f"error: cannot skip step 'bill' of run '{held.id}' with that "
                            "result: ") and "amount" in first
    assert (await invoices.get(held.id)).status is rf.Status.HELD  # nothing written
    not_json = cli(shared, "runs", "skip-step", held.id, "bill", "--result", "{nope", *APP)
    assert not_json.code == 2 and "--result" in not_json.err and "not JSON" in not_json.err

    result = tmp_path / "bill.json"
    result.write_text(json.dumps({"ref": "M-7", "amount": 12.5, "paid": False}))
    done = cli(shared, "runs", "skip-step", held.id, "bill", "--result", f"@{result}", *APP)
    assert done.code == 0, done.err
    assert "completed" in done.out
    run = await invoices.get(held.id)
    assert run.status is rf.Status.COMPLETED
    assert run.steps["bill"].result == Bill("M-7", 12.5, paid=False)
    assert run.value == "receipt M-7 for 12.5 (unpaid)"


async def test_refusals_are_one_line_naming_the_status_and_the_commands(
        shared: Shared) -> None:
    held = await _held()
    not_failed = cli(shared, "runs", "retry-step", held.id, "draft", *APP)
    assert not_failed.code == 1 and len(not_failed.err.splitlines()) == 2  # + the -v hint
    assert (f"error: cannot retry_step step 'draft' of run '{held.id}': that step is "
            "completed") in not_failed.err and "its failed step is 'bill'" in not_failed.err

    on_held = cli(shared, "continue", held.id, "bill", "--payload", "1", *APP)
    assert on_held.code == 1
    assert f"'reactorflow runs retry-step {held.id} STEP' runs the failed step" in on_held.err

    paused = await orders.run(item="tea")
    refused = cli(shared, "runs", "skip-step", paused.id, "reserve", "--result", '"x"', *APP)
    assert refused.code == 1 and "Traceback" not in refused.err
    assert refused.err.startswith(f"error: cannot skip_step run '{paused.id}': it is paused. ")
    assert f"'reactorflow continue {paused.id} STEP --payload JSON' resumes it" in refused.err

    watched = cli(shared, "runs", "watch", held.id, "--timeout", "10")
    assert watched.code == 0, watched.err
    last = watched.out.splitlines()[-1]
    assert last.startswith(f"run {held.id} is held: step 'bill' failed: ConnectionError")
    assert f"'reactorflow runs retry-step {held.id} bill' runs the failed step again" in last
    assert f"'reactorflow runs skip-step {held.id} bill --result JSON' supplies" in last
    usage = cli(shared, "runs", "retry-step", held.id, "bill", "--timeout", "5", *APP)
    assert usage.code == 2 and "--timeout only applies with --wait" in usage.err
    assert (await invoices.get(held.id)).status is rf.Status.HELD


async def test_rewind_runs_a_step_and_its_dependents_again_with_changed_inputs(
        shared: Shared, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BILLING_FIXED_ENV, "1")  # here and in the CLI's process
    done = await invoices.run(customer="ACME")
    assert done.status is rf.Status.COMPLETED and done.value == "receipt B-1 for 12.5"
    rewound = cli(shared, "runs", "rewind", done.id, "--to", "bill", "--inputs",
                  '{"amount": 20.0}', "--wait", "--timeout", "30", *APP, "--json")
    assert rewound.code == 0, rewound.err
    run = json.loads(rewound.out)
    assert run["id"] == done.id and run["status"] == "completed"
    assert run["value"] == "receipt B-1 for 20.0" and run["inputs"]["amount"] == 20.0
    assert run["steps"]["draft"]["attempts"] == 1  # it does not depend on bill: kept

    bad_inputs = cli(shared, "runs", "rewind", done.id, "--to", "bill", "--inputs", "[1]", *APP)
    assert bad_inputs.code == 2 and "--inputs" in bad_inputs.err and "JSON object" in bad_inputs.err
    unknown = cli(shared, "runs", "rewind", done.id, "--to", "nope", *APP)
    assert unknown.code == 1 and "Traceback" not in unknown.err
    assert unknown.err.startswith(f"error: run '{done.id}' has no step 'nope' to go back to")
    assert "'draft', 'bill', 'mail'" in unknown.err
    failed = await orders.run(item="gin", fail=True)
    refused = cli(shared, "runs", "rewind", failed.id, "--to", "reserve", *APP)
    assert refused.code == 1
    assert refused.err.startswith(f"error: cannot rewind run '{failed.id}': it is failed. ")
    assert f"'reactorflow retry {failed.id}' starts a new run" in refused.err


async def test_pause_and_resume_a_sleeping_run(shared: Shared) -> None:
    asleep = await reminders.run(order_id="A7")  # sleeps 2 d 3 h: paused without waking it
    paused = cli(shared, "runs", "pause", asleep.id, "--reason", "supplier outage", *APP,
                 "--json")
    assert paused.code == 0, paused.err
    run = json.loads(paused.out)
    assert run["status"] == "paused" and run["waiting_on"] == []
    assert run["paused_by"]["reason"] == "supplier outage"
    shown = cli(shared, "runs", "show", asleep.id)
    assert any(line.startswith("paused by") and line.rstrip().endswith(": supplier outage")
               for line in shown.out.splitlines()), shown.out
    again = cli(shared, "runs", "pause", asleep.id, *APP)
    assert again.code == 1 and "Traceback" not in again.err
    assert again.err.startswith(f"error: cannot pause run '{asleep.id}': it is paused")
    resumed = cli(shared, "runs", "resume", asleep.id, *APP, "--json")
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["status"] == "running"  # asleep again, for its timer
    twice = cli(shared, "runs", "resume", asleep.id, *APP)
    assert twice.code == 1
    assert twice.err.startswith(f"error: cannot resume run '{asleep.id}': it is running")
    assert f"'reactorflow runs pause {asleep.id}' stops it" in twice.err
    await reminders.cancel(asleep.id)
