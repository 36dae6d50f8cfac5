"""The runs list's multi-select in headless Chromium: a checkbox per row, "select all
matching" (the list's filters, counted by a dry run), the bulk action bar that asks for
confirmation first (a no sends nothing) and then shows each run's outcome; a screenshot is
saved (docs/img/dashboard-bulk.png with REACTORFLOW_DOCS_SCREENSHOTS=1, else beside the test's
temporary files) and looked at."""

from __future__ import annotations

from pathlib import Path

import pytest

import reactorflow as rf
from tests.browser.conftest import Dashboard, require_playwright, screenshot_dir
from tests.operate.flows import orders

require_playwright()
pytestmark = pytest.mark.slow


async def test_selected_rows_are_cancelled_after_confirmation(dashboard: Dashboard,
                                                              tmp_path: Path) -> None:
    paused = [await orders.run(item=f"p{n}") for n in range(3)]
    failed = await orders.run(item="gin", fail=True)
    page = dashboard.page
    await dashboard.sign_in()
    for run in (paused[0], paused[1], failed):
        await page.locator(f"#runs tr[data-run='{run.id}'] input.pick").check()
    await page.locator("#bulk-count", has_text="3 run(s) selected").wait_for()

    dashboard.confirm = False  # a no sends nothing
    await page.locator("#bulk-bar button[data-bulk='cancel']").click()
    assert dashboard.dialogs[-1] == (f"Cancel 3 selected run(s): {paused[0].id}, "
                                     f"{paused[1].id}, {failed.id}?")  # named, each of them
    assert [(await orders.get(r.id)).status for r in paused] == [rf.Status.PAUSED] * 3

    dashboard.confirm = True
    await page.locator("#bulk-bar button[data-bulk='cancel']").click()
    await page.locator("#bulk-summary", has_text="cancel: 2 ok, 1 refused (of 3)").wait_for()
    refused = page.locator(f"#bulk-outcomes li[data-run='{failed.id}']")
    assert "refused: cannot cancel" in (await refused.text_content() or "")
    ok = page.locator(f"#bulk-outcomes li[data-run='{paused[0].id}']")
    assert "cancelled" in (await ok.text_content() or "")
    await page.locator(f"#runs tr[data-run='{paused[0].id}'] .s-cancelled").wait_for()
    await page.locator("#bulk-count", has_text="0 run(s) selected").wait_for()
    assert await page.locator("#bulk-bar button[data-bulk='cancel']").is_disabled()
    shot = screenshot_dir(tmp_path)
    await page.screenshot(path=str(shot / "dashboard-bulk.png"), full_page=True)
    statuses = [(await orders.get(r.id)).status for r in paused]
    assert statuses == [rf.Status.CANCELLED, rf.Status.CANCELLED, rf.Status.PAUSED]
    assert (await orders.get(failed.id)).status is rf.Status.FAILED


async def test_select_all_matching_acts_on_the_filtered_runs(dashboard: Dashboard) -> None:
    paused = [await orders.run(item=f"p{n}") for n in range(4)]
    failed = await orders.run(item="gin", fail=True)
    page = dashboard.page
    await dashboard.sign_in()
    await page.locator(f"#runs tr[data-run='{failed.id}']").wait_for()
    await page.locator("#f-status").select_option("paused")
    await page.locator(f"#runs tr[data-run='{failed.id}']").wait_for(state="detached")
    await page.get_by_role("button", name="Select all matching").click()
    await page.locator("#bulk-count", has_text="All 4 matching run(s) selected").wait_for()
    await page.locator("#bulk-bar button[data-bulk='cancel']").click()
    assert dashboard.dialogs[-1] == ("Cancel all 4 run(s) matching the list's filters "
                                     "(status=paused)?")
    await page.locator("#bulk-summary", has_text="cancel: 4 ok, 0 refused (of 4)").wait_for()
    assert [(await orders.get(r.id)).status for r in paused] == [rf.Status.CANCELLED] * 4
    assert (await orders.get(failed.id)).status is rf.Status.FAILED
