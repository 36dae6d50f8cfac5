"""The why banner of the dashboard's run page in headless Chromium: what the run waits on and
since when (`GET /api/runs/{id}/why`), that it is moving, or nothing once it ended; a
screenshot is saved (docs/img/dashboard-why.png with REACTORFLOW_DOCS_SCREENSHOTS=1, else
beside the test's temporary files) and looked at."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import Dashboard, require_playwright, screenshot_dir
from tests.operate.flows import orders, reminders

require_playwright()
pytestmark = pytest.mark.slow


async def _open_run(board: Dashboard, run_id: str) -> None:
    await board.page.goto(f"{board.url}?run={run_id}")
    await board.page.locator("#run-status .status").wait_for()


async def test_the_banner_says_what_the_run_waits_on_and_since_when(
        dashboard: Dashboard, tmp_path: Path) -> None:
    paused = await orders.run(item="tea")
    sleeping = await reminders.run(order_id="A1")
    failed = await orders.run(item="gin", fail=True)
    page = dashboard.page
    await dashboard.sign_in()

    await _open_run(dashboard, paused.id)
    line = page.locator("#why-banner p[data-kind='interrupt']")
    await line.wait_for()
    text = await line.text_content()
    assert text is not None
    assert text.startswith("Waiting on interrupt (step approve) since ")
    assert " UTC (" in text and "waiting for a payload for interrupt 'approve'" in text
    shot = screenshot_dir(tmp_path)
    await page.screenshot(path=str(shot / "dashboard-why.png"))

    await _open_run(dashboard, sleeping.id)
    slept = page.locator("#why-banner p[data-kind='sleep']")
    await slept.wait_for()
    wake = sleeping.steps["cool_off"].wake_at
    assert wake is not None
    assert f"until {wake.strftime('%Y-%m-%d %H:%M:%S')} UTC" in (await slept.text_content()
                                                                  or "")

    await _open_run(dashboard, failed.id)
    await page.locator("#run-status .s-failed").wait_for()
    await page.wait_for_function("document.getElementById('why-banner').hidden")
