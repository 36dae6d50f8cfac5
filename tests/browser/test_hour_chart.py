"""The home page's chart of the last hour in headless Chromium: bars per status drawn from
GET /api/stats/hour over real runs, with a legend of the totals (a screenshot is saved)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.conftest import Dashboard, require_playwright
from tests.operate.flows import approval, orders, payments

require_playwright()
pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("REACTORFLOW_SCREENSHOTS", "/tmp/reactorflow-screenshots"))


async def test_the_home_chart_shows_runs_per_status_of_the_last_hour(
        dashboard: Dashboard) -> None:
    for item in ("tea", "coffee"):
        shipped = await orders.run(item=item, qty=1)
        await orders.continue_(shipped.id, step="approve", payload=approval())
    await orders.run(item="oolong", qty=2)  # paused at its interrupt
    for note in ("a", "b", "c"):
        await payments.run(note=note)  # failed
    page = dashboard.page
    await dashboard.sign_in()
    chart = page.locator("#hour-chart")
    await chart.wait_for()
    bars = page.locator("#hour-svg rect.hc-bar")
    await bars.first.wait_for()
    drawn: dict[str, int] = {}
    for i in range(await bars.count()):
        bar = bars.nth(i)
        status = await bar.get_attribute("data-status")
        assert status is not None
        drawn[status] = drawn.get(status, 0) + int(await bar.get_attribute("data-count") or 0)
    assert drawn == {"completed": 2, "paused": 1, "failed": 3}
    legend = await page.locator("#hour-legend").text_content() or ""
    assert "completed 2" in legend and "failed 3" in legend and "paused 1" in legend
    SHOTS.mkdir(parents=True, exist_ok=True)
    await chart.screenshot(path=str(SHOTS / "dashboard-hour-chart.png"))
    await page.screenshot(path=str(SHOTS / "dashboard-home.png"))
