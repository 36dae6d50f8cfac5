"""A held run on the dashboard, in headless Chromium: the held filter and badge, Retry step and
Skip step shown only for a held run and each confirmed first, a retried run that completes, and
the skip-step form generated from the step's return type's JSON Schema, which refuses to send
without a required field and then sends a valid result."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import reactorflow as rf
from tests.browser.conftest import DOCS_IMG, Dashboard, docs_screenshots, require_playwright
from tests.browser.test_dashboard import _open_run, _status
from tests.operate.flows import BILLING_FIXED_ENV, Bill, invoices, orders, reminders

expect = require_playwright().expect
pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("REACTORFLOW_TEST_SHOTS", "/tmp/reactorflow-shots"))


async def _held() -> rf.Run:
    run = await invoices.run(customer="ACME")
    assert run.status is rf.Status.HELD
    return run


async def test_a_held_run_is_retried_from_the_dashboard_and_completes(
        dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch) -> None:
    held = await _held()
    await orders.run(item="tea")  # paused: filtered out
    page = dashboard.page
    await dashboard.sign_in()
    await page.locator("#f-status").select_option("held")
    rows = page.locator("#runs tbody tr")
    await expect(rows).to_have_count(1)
    assert await rows.first.get_attribute("data-run") == held.id
    await rows.first.locator(".status.s-held").wait_for()
    await _open_run(dashboard, held.id)
    await _status(dashboard, "held")
    await page.locator("#facts dd", has_text="bill: it failed and waits for an operator").wait_for()
    retry_step = page.get_by_role("button", name="Retry step")
    assert await retry_step.is_enabled()
    assert await page.get_by_role("button", name="Undo").is_enabled()
    assert await page.get_by_role("button", name="Retry", exact=True).is_disabled()
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / "held-run.png"), full_page=True)

    dashboard.confirm = False  # refused: nothing is sent
    async with page.expect_event("dialog"):
        await retry_step.click()
    assert dashboard.dialogs == [f"Retry step bill (run it again with the code now deployed) "
                                 f"of run {held.id}?"]
    assert (await invoices.get(held.id)).status is rf.Status.HELD

    monkeypatch.setenv(BILLING_FIXED_ENV, "1")  # the fix is deployed (the server's process)
    dashboard.confirm = True
    await retry_step.click()
    await _status(dashboard, "completed")
    await page.locator("#message", has_text="Retried step bill: the run is completed.").wait_for()
    assert len(dashboard.dialogs) == 2
    done = await invoices.get(held.id)
    assert done.status is rf.Status.COMPLETED and done.value == "receipt B-1 for 12.5"
    assert await retry_step.is_hidden()  # only a held run shows the repair buttons


async def test_skip_step_form_enforces_its_schema_then_sends_a_confirmed_result(
        dashboard: Dashboard) -> None:
    held = await _held()
    page = dashboard.page
    await dashboard.sign_in()
    await _open_run(dashboard, held.id)
    await _status(dashboard, "held")
    await page.get_by_role("button", name="Skip step").click()  # opens the form: no dialog
    form = page.locator("form[data-skip='bill']")
    await form.get_by_role("heading", name="Skip step bill").wait_for()
    ref, amount = form.get_by_label("ref"), form.get_by_label("amount")
    await ref.wait_for()
    assert await amount.get_attribute("type") == "number"
    paid = form.get_by_role("group", name="paid")
    assert await paid.get_by_label("yes", exact=True).is_checked()  # the schema's default
    submit = form.get_by_role("button", name="Skip step")
    await amount.fill("12.5")  # ref, a required field, left empty
    await submit.click()
    await form.get_by_text("Fix the highlighted fields.").wait_for()
    await amount.fill("0")  # > 0 is what the type says
    await ref.fill("M-7")
    await submit.click()
    await form.get_by_text("Fix the highlighted fields.").wait_for()
    assert dashboard.dialogs == []  # refused by the form: never asked, never sent
    assert (await invoices.get(held.id)).status is rf.Status.HELD
    await amount.fill("12.5")
    await paid.get_by_label("no", exact=True).check()
    await form.screenshot(path=str(SHOTS / "skip-form.png"))

    dashboard.confirm = False
    await submit.click()
    await form.get_by_text("Not sent.").wait_for()
    asked = dashboard.dialogs[0]
    assert asked.startswith(f"Skip step bill of run {held.id} with this result?")
    assert '"ref": "M-7"' in asked and '"amount": 12.5' in asked and '"paid": false' in asked
    assert (await invoices.get(held.id)).status is rf.Status.HELD

    dashboard.confirm = True
    await submit.click()
    await _status(dashboard, "completed")
    await page.locator("#value", has_text="receipt M-7 for 12.5 (unpaid)").wait_for()
    assert len(dashboard.dialogs) == 2 and await form.count() == 0
    done = await invoices.get(held.id)
    assert done.steps["bill"].result == Bill("M-7", 12.5, paid=False)
    await page.screenshot(path=str(SHOTS / "skipped-run.png"), full_page=True)


async def test_rewind_from_the_dashboard_asks_the_step_then_confirms(
        dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BILLING_FIXED_ENV, "1")
    done = await invoices.run(customer="ACME")
    assert done.status is rf.Status.COMPLETED
    page = dashboard.page
    await dashboard.sign_in()
    await _open_run(dashboard, done.id)
    await _status(dashboard, "completed")
    assert await page.get_by_role("button", name="Retry step").is_hidden()
    await page.get_by_role("button", name="Rewind", exact=True).click()  # opens the form
    form = page.locator(f"form[data-rewind='{done.id}']")
    submit = form.get_by_role("button", name="Rewind")
    await submit.click()  # no step chosen
    await form.get_by_text("Fix the highlighted fields.").wait_for()
    await form.get_by_label("to step").select_option("bill")
    await form.get_by_label("changed inputs").fill("[1]")  # not an object
    await submit.click()
    await form.get_by_text("Fix the highlighted fields.").wait_for()
    assert dashboard.dialogs == []
    await form.get_by_label("changed inputs").fill('{"amount": 20.0}')
    await form.screenshot(path=str(SHOTS / "rewind-form.png"))
    await submit.click()
    await page.locator("#message", has_text="Rewound to step bill").wait_for()
    assert dashboard.dialogs[0].startswith(f"Rewind run {done.id} to step bill (undo it")
    assert '"amount": 20' in dashboard.dialogs[0]
    await page.locator("#value", has_text="receipt B-1 for 20.0").wait_for()
    rewound = await invoices.get(done.id)
    assert rewound.value == "receipt B-1 for 20.0" and rewound.steps["draft"].attempts == 1


async def test_pause_asks_why_and_resume_asks_first(dashboard: Dashboard) -> None:
    asleep = await reminders.run(order_id="A9")  # sleeping: paused without waking it
    page = dashboard.page
    await dashboard.sign_in()
    await _open_run(dashboard, asleep.id)
    assert await page.get_by_role("button", name="Resume").is_disabled()
    dashboard.confirm = False  # the prompt dismissed: nothing is sent
    async with page.expect_event("dialog"):
        await page.get_by_role("button", name="Pause").click()
    assert (await reminders.get(asleep.id)).status is rf.Status.RUNNING
    dashboard.confirm = True
    await page.get_by_role("button", name="Pause").click()
    await _status(dashboard, "paused")
    await page.locator("#facts dd[data-fact='paused-by']").wait_for()
    assert all(d.startswith(f"Pause run {asleep.id}? It stops at its next step boundary")
               for d in dashboard.dialogs) and len(dashboard.dialogs) == 2
    run = await reminders.get(asleep.id)
    assert run.status is rf.Status.PAUSED and run.paused_by is not None
    await page.get_by_role("button", name="Resume").click()
    await _status(dashboard, "running")
    assert dashboard.dialogs[-1] == f"Resume (take on again) run {asleep.id}?"
    assert (await reminders.get(asleep.id)).status is rf.Status.RUNNING
    await reminders.cancel(asleep.id)


@pytest.mark.parametrize("server", [None], indirect=True)
async def test_a_refused_repair_shows_why_and_changes_nothing(dashboard: Dashboard) -> None:
    held = await _held()  # served without a token: reads are open, every change refused
    page = dashboard.page
    await page.goto(f"{dashboard.url}?run={held.id}")
    await _status(dashboard, "held")
    await page.get_by_role("button", name="Retry step").click()
    await page.locator("#message.bad", has_text="changes need a token").wait_for()
    await page.get_by_role("button", name="Skip step").click()
    form = page.locator("form[data-skip='bill']")
    await form.get_by_label("ref").fill("M-8")
    await form.get_by_label("amount").fill("4")
    await form.get_by_role("button", name="Skip step").click()
    await form.locator("p.error", has_text="changes need a token").wait_for()
    assert len(dashboard.dialogs) == 2  # both were confirmed, then refused by the server
    assert (await invoices.get(held.id)).status is rf.Status.HELD


@docs_screenshots
async def test_screenshots_for_the_docs(dashboard: Dashboard) -> None:
    """docs/img/dashboard-run-held.png and dashboard-skip-form.png, from the real browser."""
    held = await _held()
    page = dashboard.page
    await dashboard.sign_in()
    await _open_run(dashboard, held.id)
    await _status(dashboard, "held")
    await page.screenshot(path=str(DOCS_IMG / "dashboard-run-held.png"), full_page=True)
    await page.get_by_role("button", name="Skip step").click()
    form = page.locator("form[data-skip='bill']")
    await form.get_by_label("ref").fill("MANUAL-7")
    await form.screenshot(path=str(DOCS_IMG / "dashboard-skip-form.png"))
