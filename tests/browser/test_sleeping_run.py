"""A sleeping run on the dashboard in headless Chromium: the sleep step's note says "sleeping
until … UTC (in 2 d 3 h)", its graph node is a sleep that reads "sleeping", and the page
phrases durations and notes exactly as `reactorflow runs show` does."""

from __future__ import annotations

import time

import pytest

import reactorflow as rf
from reactorflow import clock
from reactorflow.cli.notes import sleeping, span, step_note
from tests.browser.conftest import DOCS_IMG, Dashboard, docs_screenshots, require_playwright
from tests.operate.flows import reminders
from tests.timers.test_sleep_shown import SPANS

require_playwright()
pytestmark = pytest.mark.slow


async def _open_run(board: Dashboard, run_id: str) -> None:
    await board.page.goto(f"{board.url}?run={run_id}")
    await board.page.locator("#run-status .status").wait_for()


async def test_a_sleeping_step_says_until_when(dashboard: Dashboard) -> None:
    run = await reminders.run(order_id="A1")  # sleeps 2 d 3 h, on the real clock
    wake = run.steps["cool_off"].wake_at
    assert wake is not None
    page = dashboard.page
    await dashboard.sign_in()
    await _open_run(dashboard, run.id)
    note = await page.locator("#steps tr[data-step='cool_off'] td.note").text_content()
    assert note == sleeping(wake, time.time())  # as `reactorflow runs show` says it
    assert note is not None and note.endswith(" UTC (in 2 d 3 h)")
    assert await page.locator("#steps tr[data-step='cool_off'] .status").text_content() == (
        "waiting")
    assert await page.locator("#steps tr[data-step='remind'] td.note").text_content() == ""
    node = page.locator("#graph g[data-step='cool_off']")
    assert "kind-sleep" in (await node.get_attribute("class") or "").split()
    assert await node.locator("text").text_content() == "cool_off \u00b7 sleeping"
    assert await node.locator("title").text_content() == f"cool_off (sleep): {note}"


async def test_a_sleeping_run_is_undone_and_cancelled_from_its_buttons(
        dashboard: Dashboard) -> None:
    page = dashboard.page
    await dashboard.sign_in()
    for action, name in (("undo", "Undo"), ("cancel", "Cancel")):
        run = await reminders.run(order_id=f"U-{action}")
        await _open_run(dashboard, run.id)
        button = page.locator(f"#actions button[data-action='{action}']")
        assert await button.is_enabled()  # a run that only sleeps: at once, as a paused one
        await button.click()
        await page.locator("#run-status .s-cancelled").wait_for()
        assert dashboard.dialogs[-1].startswith(name)
        stopped = await reminders.get(run.id)
        assert stopped.status is rf.Status.CANCELLED
        assert stopped.steps["cool_off"].status is rf.StepStatus.SKIPPED


async def test_the_page_phrases_notes_as_the_cli_does(dashboard: Dashboard) -> None:
    page = dashboard.page
    await dashboard.sign_in()
    seconds = [case for case, _ in SPANS]
    assert await page.evaluate("cases => cases.map(window.reactorflowNotes.inWords)",
                               seconds) == [span(s) for s in seconds]
    now = 1_796_000_000.0
    states = [rf.StepState(rf.StepStatus.WAITING, wake_at=clock.utc(now + offset))
              for offset in (3 * 86_400 + 7_200, 61.0, 0.2, -3.0, 37.5)]
    states += [rf.StepState(rf.StepStatus.PENDING, gate="lock 'account:A1'"),
               rf.StepState(rf.StepStatus.FAILED, error="ValueError: no stock"),
               rf.StepState(rf.StepStatus.COMPLETED, wake_at=clock.utc(now + 60))]
    forms = [{"status": s.status.value, "wake_at": s.wake_at.isoformat() if s.wake_at else None,
              "gate": s.gate, "error": s.error} for s in states]
    shown = await page.evaluate(
        "([forms, now]) => forms.map((s) => window.reactorflowNotes.stepNote(s, now))",
        [forms, now])
    assert shown == [step_note(s, now) for s in states]


@docs_screenshots
async def test_screenshot_for_the_docs(dashboard: Dashboard) -> None:
    """docs/img/dashboard-run-sleeping.png, taken from the real browser."""
    run = await reminders.run(order_id="1042")
    page = dashboard.page
    await dashboard.sign_in()
    await _open_run(dashboard, run.id)
    await page.locator("#steps tr[data-step='cool_off'] td.note", has_text="sleeping").wait_for()
    await page.screenshot(path=str(DOCS_IMG / "dashboard-run-sleeping.png"), full_page=True)
