"""The dashboard in headless Chromium: sign in with the token, find a paused run, fill and
submit its interrupt form, watch runs change live, cancel and retry from the buttons, page and
filter the list, and every user value shown as text (never run as HTML)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

import reactorflow as rf
from reactorflow import config, records
from reactorflow.records import ErrorRecord, Event, RollbackFailure, RunError, RunMeta, RunState
from reactorflow.status import HandlerKind, Status, StepStatus
from tests.browser.conftest import DOCS_IMG, TOKEN, Dashboard, docs_screenshots, require_playwright
from tests.operate.flows import XSS, approval, orders, payments, signoffs

expect = require_playwright().expect
pytestmark = pytest.mark.slow
LIVE = 20_000  # ms: how long the page may take to show a change (it arrives within ~1 s)


async def _open_run(board: Dashboard, run_id: str) -> None:
    await board.page.goto(f"{board.url}?run={run_id}")
    await board.page.locator("#run-status .status").wait_for()  # the run arrived
    assert await board.page.locator("#run-id").text_content() == run_id


async def _status(board: Dashboard, status: str) -> None:
    await board.page.locator(f"#run-status .s-{status}").wait_for(timeout=LIVE)


async def _choose(form: Any, field: str, answer: str) -> None:
    """Answer a yes/no field of an interrupt form (a required boolean is an explicit choice)."""
    await form.get_by_role("group", name=field).get_by_label(answer, exact=True).check()


async def _fill_approval(form: Any, *, level: str = "low", amount: str = "3") -> None:
    """Fill `orders`' approval form (Lyon, 69001), then press Continue."""
    await _choose(form, "approved", "yes")
    await form.get_by_label("level").select_option(label=level)
    await form.get_by_label("amount").fill(amount)
    await form.get_by_label("city").fill("Lyon")
    await form.get_by_label("zip").fill("69001")
    await form.get_by_role("button", name="Continue").click()


async def test_sign_in_find_a_paused_run_and_submit_its_form(dashboard: Dashboard) -> None:
    paused = await orders.run(item="tea", qty=2)
    page = dashboard.page
    await page.goto(dashboard.url)
    token = page.get_by_label("Token")
    assert await token.get_attribute("type") == "password"
    await token.fill("wrong")
    await page.get_by_role("button", name="Open").click()
    await page.get_by_text("wrong token").wait_for()
    await token.fill(TOKEN)
    await page.get_by_role("button", name="Open").click()
    assert await page.evaluate("sessionStorage.getItem('reactorflow-token')") == TOKEN

    row = page.locator(f"#runs tr[data-run='{paused.id}']")
    await row.get_by_text("waiting on approve").wait_for()
    await row.get_by_role("link", name=paused.id).click()
    await _status(dashboard, "paused")
    form = page.locator("form[data-interrupt='approve']")
    await _fill_approval(form, level="high", amount="500")  # above the schema's maximum of 100
    await form.get_by_text("Fix the highlighted fields.").wait_for()
    assert (await orders.get(paused.id)).status is rf.Status.PAUSED  # nothing was sent
    await form.get_by_label("amount").fill("7")
    await form.get_by_role("button", name="Continue").click()
    await _status(dashboard, "completed")
    await page.locator("#value", has_text="2xtea to Lyon").wait_for()
    done = await orders.get(paused.id)
    assert done.status is rf.Status.COMPLETED and done.value == "2xtea to Lyon"
    assert done.steps["approve"].status == "completed"
    await page.reload()  # the token is kept for the tab: no second prompt
    await _status(dashboard, "completed")
    assert await page.locator("#login").is_hidden()


async def test_a_run_continued_elsewhere_completes_live_on_the_page(
        dashboard: Dashboard) -> None:
    await dashboard.sign_in()
    paused = await orders.run(item="gin")
    page = dashboard.page
    await page.locator(f"#runs tr[data-run='{paused.id}']").wait_for(timeout=LIVE)  # list: live
    await _open_run(dashboard, paused.id)
    await page.locator("#graph g[data-step='ship'].s-pending").wait_for()
    await orders.continue_(paused.id, step="approve", payload=approval())  # not via the page
    await _status(dashboard, "completed")
    await page.locator("#graph g[data-step='ship'].s-completed").wait_for()
    assert await page.locator("form.interrupt").count() == 0


async def test_cancel_and_retry_from_the_buttons(dashboard: Dashboard) -> None:
    await dashboard.sign_in()
    paused = await orders.run(item="rum")
    page = dashboard.page
    await _open_run(dashboard, paused.id)
    assert await page.get_by_role("button", name="Retry").is_disabled()
    await page.get_by_role("button", name="Cancel").click()
    await _status(dashboard, "cancelled")
    assert dashboard.dialogs == [f"Cancel run {paused.id}?"]
    assert (await orders.get(paused.id)).status is rf.Status.CANCELLED
    await page.get_by_role("button", name="Retry").click()
    await page.locator("#facts dd a", has_text=paused.id).wait_for()  # "Retried from"
    new_id = (await page.locator("#run-id").text_content() or "").strip()
    assert new_id != paused.id
    assert (await orders.get(new_id)).retried_from == paused.id
    await _status(dashboard, "paused")
    assert dashboard.dialogs[-1].startswith(f"Retry (start a new run with the inputs of) run "
                                            f"{paused.id}")


async def test_undo_asks_first_and_a_refused_confirmation_changes_nothing(
        dashboard: Dashboard) -> None:
    await dashboard.sign_in()
    paused = await orders.run(item="tea")
    page = dashboard.page
    await _open_run(dashboard, paused.id)

    dashboard.confirm = False
    async with page.expect_event("dialog"):
        await page.get_by_role("button", name="Undo").click()
    assert dashboard.dialogs == [
        f"Undo (roll back every completed step of) run {paused.id}?"]
    assert await page.locator("#message").text_content() == ""
    assert (await orders.get(paused.id)).status is rf.Status.PAUSED


async def test_an_unknown_run_says_so(dashboard: Dashboard) -> None:
    await dashboard.sign_in()
    await dashboard.page.goto(f"{dashboard.url}?run=nope")
    await dashboard.page.locator("#message", has_text="no run 'nope'").wait_for()


@pytest.mark.parametrize("server", [None], indirect=True)
async def test_without_a_token_the_page_reads_but_every_change_is_refused(
        dashboard: Dashboard) -> None:
    paused = await orders.run(item="tea")
    page = dashboard.page
    await page.goto(dashboard.url)  # no token asked: reads are open
    await page.locator(f"#runs tr[data-run='{paused.id}']").wait_for()
    await _open_run(dashboard, paused.id)
    await page.get_by_role("button", name="Cancel").click()
    await page.locator("#message", has_text="changes need a token").wait_for()
    form = page.locator("form[data-interrupt='approve']")
    await _fill_approval(form)
    await form.get_by_text("changes need a token").wait_for()
    assert (await orders.get(paused.id)).status is rf.Status.PAUSED
    assert await page.locator("#login").is_hidden()


async def test_the_list_filters_and_pages(dashboard: Dashboard) -> None:
    made = [(await orders.run(item=f"item-{i}")).id for i in range(26)]
    failed = await orders.run(item="gin", fail=True)
    await dashboard.sign_in()
    page = dashboard.page
    rows = page.locator("#runs tbody tr")
    await page.locator(f"#runs tr[data-run='{failed.id}']").wait_for()
    await page.locator("#f-limit").select_option("25")
    await expect(rows).to_have_count(25)
    assert await rows.last.get_attribute("data-run") == made[2]
    await page.get_by_role("button", name="Older").click()
    await page.locator(f"#runs tr[data-run='{made[0]}']").wait_for()
    assert [await r.get_attribute("data-run") for r in await rows.all()] == made[1::-1]
    await page.get_by_role("button", name="Newest").click()
    await page.locator(f"#runs tr[data-run='{failed.id}']").wait_for()
    await page.locator("#f-status").select_option("failed")
    await expect(rows).to_have_count(1)
    assert await rows.first.get_attribute("data-run") == failed.id
    await page.locator("#f-status").select_option("halted")
    await page.locator("#no-runs").wait_for()


async def _crafted_run(storage: rf.Storage) -> str:
    """A stored run whose reactor, step names, error, events and inputs are all script: as a
    foreign or corrupted writer could leave them (reactorflow's own names are validated)."""
    run_id = f"xss{uuid.uuid4().hex[:12]}"
    now = time.time()
    error = RunError(XSS, "Boom", XSS, traceback=XSS,
                     rollback_failures=[RollbackFailure(XSS, HandlerKind.UNDO, XSS, "Boom")])
    meta = RunMeta(records.SCHEMA_VERSION, run_id, "ops.foreign", now, records.raw({"n": XSS}),
                   {})
    state = RunState(Status.FAILED, now, error=error)
    await storage.create_run(run_id, reactor="ops.foreign", status=Status.FAILED,
                             meta=records.encode(meta), state=records.encode(state),
                             created_at=now, owner="w", lock_ttl=10.0,
                             events=[records.encode(Event(now, "step.failed", XSS, 1, XSS))])
    step = records.StepRecord(StepStatus.FAILED, 1, now, now, error=ErrorRecord("Boom", XSS))
    await storage.save_step(run_id, "w", XSS, records.encode(step))
    await storage.release_lock(run_id, "w")
    return run_id


async def test_every_user_value_is_shown_as_text(dashboard: Dashboard) -> None:
    paused = await orders.run(item=XSS)
    completed = await orders.continue_(
        (await orders.run(item=XSS)).id, step="approve",
        payload=approval(note=XSS, ship_to={"city": XSS, "zip": "12345"}))
    failed = await payments.run(note=XSS)
    assert failed.error is not None and failed.error.rollback_failures
    crafted = await _crafted_run(config.current_storage())
    page = dashboard.page
    await dashboard.sign_in()
    await page.locator(f"#runs tr[data-run='{failed.id}']").get_by_text(
        "courier lost <script>").wait_for()
    for run_id, shows in [(paused.id, "#inputs"), (completed.id, "#value"),
                          (failed.id, "#rollback-failures"), (crafted, "#steps")]:
        await _open_run(dashboard, run_id)
        await page.locator(shows, has_text="<script>window.__xss = 1</script>").wait_for()
    # a step name: its box's label is cut to fit (graph.js), its tooltip holds all of it
    await page.locator("#graph g.node title", has_text="onerror=").wait_for(state="attached")
    await page.locator("#history td", has_text="<img src=x").first.wait_for()
    assert await page.evaluate("window.__xss") is None
    assert await page.locator("main img, main script").count() == 0


@docs_screenshots
async def test_screenshots_for_the_docs(dashboard: Dashboard) -> None:
    """docs/img/dashboard-*.png, taken from the real browser."""
    for item in ("tea", "coffee", "cocoa"):
        await orders.run(item=item, qty=2)
    shipped = await orders.run(item="matcha", qty=3)
    await orders.continue_(shipped.id, step="approve", payload=approval())
    failed = await payments.run(note="order 1042")
    paused = await orders.run(item="oolong", qty=4)
    page = dashboard.page
    await dashboard.sign_in()
    await page.locator(f"#runs tr[data-run='{paused.id}']").wait_for()
    await page.screenshot(path=str(DOCS_IMG / "dashboard-runs.png"))
    await _open_run(dashboard, paused.id)
    form = page.locator("form[data-interrupt='approve']")
    await _choose(form, "approved", "yes")
    await form.get_by_label("level").select_option(label="high")
    await form.get_by_label("amount").fill("12")
    await form.get_by_label("city").fill("Lyon")
    await page.screenshot(path=str(DOCS_IMG / "dashboard-run-paused.png"), full_page=True)
    await _open_run(dashboard, failed.id)
    await _status(dashboard, "failed")
    await page.screenshot(path=str(DOCS_IMG / "dashboard-run-failed.png"), full_page=True)
    signoff = await signoffs.run()
    await _open_run(dashboard, signoff.id)
    await page.locator("form[data-interrupt='sign']").screenshot(
        path=str(DOCS_IMG / "dashboard-interrupt-form.png"))  # untouched: nothing chosen
