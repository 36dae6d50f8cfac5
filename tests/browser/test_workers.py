"""The workers view of the dashboard in headless Chromium: the live workers listed below the
runs with host, process, queues, versions, jobs in flight and "last seen N s ago" (user text as
text, never HTML); a worker that stops leaves the list; none live says so."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reactorflow import clock, config
from reactorflow.records import WorkerInfo, encode_worker
from reactorflow.runtime.services.heartbeats import Heartbeat
from tests.browser.conftest import Dashboard, require_playwright, screenshot_dir
from tests.operate.flows import XSS, orders

require_playwright()
pytestmark = pytest.mark.slow


async def _stranger_beats() -> None:
    """A heartbeat of another host whose stored text is hostile (shown as text)."""
    now = clock.now()
    seen = datetime.fromtimestamp(now, UTC)
    record = WorkerInfo(process=4242, host=f"h-{XSS}", queues=("reactorflow", "bulk"),
                        versions={"ops.orders": (1, 2)}, jobs_in_flight=3,
                        started_at=seen - timedelta(hours=2), last_seen=seen)
    await config.current_storage().beat("stranger", encode_worker(record), now, now + 600)


async def test_live_workers_are_listed_and_a_stopped_one_leaves(dashboard: Dashboard,
                                                               tmp_path: Path) -> None:
    assert orders.name  # its module is loaded: this process declares it
    beating = Heartbeat()
    beating.start(["reactorflow"])
    try:
        page = dashboard.page
        await dashboard.sign_in()
        mine = page.locator(f"#workers tr[data-process='{os.getpid()}']")
        await mine.wait_for()
        # looked at; refreshed in docs/img with REACTORFLOW_DOCS_SCREENSHOTS=1, as the others
        shots = screenshot_dir(tmp_path)
        await page.locator("#workers-box").screenshot(path=str(shots / "dashboard-workers.png"))
        await _stranger_beats()  # listed at the page's next refresh
        cells = mine.locator("td")
        assert await cells.nth(0).text_content() == socket.gethostname()
        assert await cells.nth(2).text_content() == "reactorflow"
        await cells.nth(3).get_by_text("ops.orders v1", exact=True).wait_for()
        assert await cells.nth(4).text_content() == "0"
        assert (await cells.nth(6).text_content() or "").endswith(" s ago")
        stranger = page.locator("#workers tr[data-process='4242']")
        await stranger.get_by_text(f"h-{XSS}").wait_for()  # as text, never as HTML
        assert await page.evaluate("window.__xss") is None
        assert await stranger.locator("td").nth(3).text_content() == "ops.orders v1,2"
        await page.locator("#workers-box").screenshot(path=str(tmp_path / "stranger.png"))
        assert await stranger.locator("td").nth(4).text_content() == "3"
    finally:
        beating.stop()
    await mine.wait_for(state="detached")  # the page refreshes the list by itself
    await config.current_storage().drop_worker("stranger")
    await page.locator("#no-workers").wait_for()
    assert "No live workers" in (await page.locator("#no-workers").text_content() or "")
