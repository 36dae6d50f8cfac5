"""Schedules on the dashboard in headless Chromium: listed below the runs with their next fire
time, last run (a link to it), state and last error (shown as text); paused and resumed from
their button after a confirmation; a change without the token is refused on the page."""

from __future__ import annotations

import time

import pytest

import reactorflow as rf
from reactorflow import config
from tests.browser.conftest import DOCS_IMG, Dashboard, docs_screenshots, require_playwright
from tests.operate.flows import XSS
from tests.schedules.flows import minutely

require_playwright()
pytestmark = pytest.mark.slow
KEY = "sched-minutely:every-minute"
NIGHTLY = "sched-minutely:1"


async def _scheduled() -> list[rf.Run]:
    """Ticks of the every-minute schedule came due (its cursor set 2.5 minutes back) and a pass
    started their runs; the nightly one has an error recorded (user text)."""
    storage = config.current_storage()
    await storage.schedule_load(KEY, round((time.time() - 150) * 1000))
    started = await rf.schedule_once(reactors=[minutely])
    await storage.schedule_record(NIGHTLY, error=f"ValueError: {XSS}")
    return started


async def test_schedules_are_listed_with_their_last_run_and_error(
        dashboard: Dashboard) -> None:
    started = await _scheduled()
    assert started
    page = dashboard.page
    await dashboard.sign_in()
    row = page.locator(f"#schedules tr[data-schedule='{KEY}']")
    await row.wait_for()
    assert await row.locator("td").nth(1).text_content() == "* * * * * (UTC)"
    assert (await row.locator("td").nth(2).text_content() or "").endswith(":00+00:00")
    await row.get_by_text("active").wait_for()
    nightly = page.locator(f"#schedules tr[data-schedule='{NIGHTLY}']")
    assert await nightly.locator("td").nth(1).text_content() == "0 2 * * * (Europe/Madrid)"
    await nightly.get_by_text(f"ValueError: {XSS}").wait_for()  # as text, never as HTML
    assert await page.evaluate("window.__xss") is None
    await row.get_by_role("link", name=started[-1].id).click()
    await page.locator("#run-status .status").wait_for()
    assert await page.locator("#run-id").text_content() == started[-1].id


async def test_pause_and_resume_from_the_dashboard(dashboard: Dashboard) -> None:
    await _scheduled()
    page = dashboard.page
    await dashboard.sign_in()
    row = page.locator(f"#schedules tr[data-schedule='{KEY}']")
    await row.get_by_role("button", name="Pause").click()
    await row.get_by_text("paused", exact=True).wait_for()
    assert dashboard.dialogs == [f"Pause schedule {KEY}?"]
    state = await config.current_storage().schedule_load(KEY, None)
    assert state is not None and state.paused
    await row.get_by_role("button", name="Resume").click()
    await row.get_by_text("active").wait_for()
    state = await config.current_storage().schedule_load(KEY, None)
    assert state is not None and not state.paused

    dashboard.confirm = False  # a refused confirmation changes nothing
    async with page.expect_event("dialog"):
        await row.get_by_role("button", name="Pause").click()
    assert dashboard.dialogs[-1] == f"Pause schedule {KEY}?"
    state = await config.current_storage().schedule_load(KEY, None)
    assert state is not None and not state.paused


@pytest.mark.parametrize("server", [None], indirect=True)
async def test_without_a_token_pausing_is_refused(dashboard: Dashboard) -> None:
    page = dashboard.page
    await page.goto(dashboard.url)
    row = page.locator(f"#schedules tr[data-schedule='{KEY}']")
    await row.get_by_role("button", name="Pause").click()
    await page.locator("#schedule-message", has_text="changes need a token").wait_for()
    state = await config.current_storage().schedule_load(KEY, None)
    assert state is None or not state.paused


@docs_screenshots
async def test_screenshot_for_the_docs(dashboard: Dashboard) -> None:
    """docs/img/dashboard-schedules.png, taken from the real browser."""
    storage = config.current_storage()
    await storage.schedule_load(KEY, round((time.time() - 150) * 1000))
    await rf.schedule_once(reactors=[minutely])
    await storage.schedule_load(NIGHTLY, round(time.time() * 1000))
    await storage.schedule_record(NIGHTLY, error="ValidationError: Expected `str`, got `int` "
                                                 "- at `$.at`")
    page = dashboard.page
    await dashboard.sign_in()
    await page.locator(f"#schedules tr[data-schedule='{NIGHTLY}']").wait_for()
    box = page.locator("#schedules-box")
    await box.scroll_into_view_if_needed()
    await page.screenshot(path=str(DOCS_IMG / "dashboard-schedules.png"), full_page=True)
