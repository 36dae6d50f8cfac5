"""The runs list's search box and filters in headless Chromium: a pasted run id opens the run,
a correlation id or an idempotency key finds its run and opens it, the filters sit in the URL
(a filtered list can be reloaded), rows lead to their run, and times show in UTC or local time
(remembered). A screenshot is saved (docs/img/dashboard-search.png with
REACTORFLOW_DOCS_SCREENSHOTS=1, else beside the test's temporary files) and looked at."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

import reactorflow as rf
from tests.browser.conftest import Dashboard, require_playwright, screenshot_dir
from tests.helpers import unique

expect = require_playwright().expect
pytestmark = pytest.mark.slow


class Order(msgspec.Struct):
    order_id: str


def _shop() -> rf.Reactor:
    flow = rf.Reactor(unique("browser.search"), inputs=Order)

    @flow.step
    async def reserve(order_id: str) -> str:
        return order_id

    @flow.interrupt(correlation_id="order:{reserve}")
    async def approve(payload: bool, reserve: str) -> bool:
        return payload

    return flow


async def _find(board: Dashboard, text: str) -> None:
    await board.page.locator("#search").fill(text)
    await board.page.get_by_role("button", name="Find").click()


async def test_the_search_box_opens_a_run_by_id_correlation_id_or_idempotency_key(
        dashboard: Dashboard, tmp_path: Path) -> None:
    shop = _shop()
    o10 = await shop.run(order_id="O10", idempotency_key="checkout-O10")
    o11 = await shop.run(order_id="O11", idempotency_key="checkout-O11")
    page = dashboard.page
    await dashboard.sign_in()
    await page.locator(f"#runs tr[data-run='{o11.id}']").wait_for()
    shot = screenshot_dir(tmp_path)
    await page.screenshot(path=str(shot / "dashboard-search.png"))

    await _find(dashboard, o10.id)
    await page.wait_for_url(re.compile(rf"\?run={o10.id}$"))
    # a find navigates: the new page has loaded before its script has opened the run
    await expect(page.locator("#run-id")).to_have_text(o10.id)
    await page.locator("#run-status .status").wait_for()

    await page.goto(dashboard.url)
    await _find(dashboard, "order:O11")
    await page.wait_for_url(re.compile(rf"\?run={o11.id}$"))
    await expect(page.locator("#run-id")).to_have_text(o11.id)

    await page.goto(dashboard.url)
    await _find(dashboard, "checkout-O10")
    await page.wait_for_url(re.compile(rf"\?run={o10.id}$"))
    await expect(page.locator("#run-id")).to_have_text(o10.id)

    await page.goto(dashboard.url)
    await _find(dashboard, "order:nobody")
    message = page.locator("#search-message")
    await message.filter(has_text="No run has").wait_for()

    # rows are links: a click on a row opens its run
    await page.locator(f"#runs tr[data-run='{o10.id}'] td.took").click()
    await page.wait_for_url(re.compile(rf"\?run={o10.id}$"))


async def test_the_filters_sit_in_the_url_and_times_toggle_between_utc_and_local(
        dashboard: Dashboard) -> None:
    shop = _shop()
    o1 = await shop.run(order_id="O1")
    await shop.run(order_id="O2")
    page = dashboard.page
    await dashboard.sign_in()
    await page.locator("#f-correlation-id").fill("order:O1")
    await page.locator("#f-since").fill("2h")
    await page.locator("#f-since").press("Enter")
    await page.wait_for_url(re.compile(r"correlation_id=order%3AO1"))
    assert "since=2h" in page.url
    rows = page.locator("#runs tbody tr")
    await page.locator(f"#runs tr[data-run='{o1.id}']").wait_for()
    assert await rows.count() == 1

    await page.reload()  # the filtered list is the same after a reload
    await page.locator(f"#runs tr[data-run='{o1.id}']").wait_for()
    assert await rows.count() == 1
    assert await page.locator("#f-correlation-id").input_value() == "order:O1"

    created = page.locator(f"#runs tr[data-run='{o1.id}'] td.created .at")
    ago = page.locator(f"#runs tr[data-run='{o1.id}'] td.created .ago")
    assert re.fullmatch(r"(just now|\d+ s ago)", await ago.text_content() or ""), (
        await ago.text_content())
    assert re.fullmatch(r"\d\s?s", await page.locator(
        f"#runs tr[data-run='{o1.id}'] td.took").text_content() or "")
    assert not (await created.text_content() or "").endswith("UTC")
    await page.locator("#tz-toggle").click()
    assert (await created.text_content() or "").endswith(" UTC")
    assert await page.locator("#tz-toggle").text_content() == "Times: UTC"
    await page.reload()  # remembered
    await page.locator(f"#runs tr[data-run='{o1.id}']").wait_for()
    assert (await created.text_content() or "").endswith(" UTC")
    await page.locator("#tz-toggle").click()
    assert not (await created.text_content() or "").endswith("UTC")

    await page.locator("#f-since").fill("soon")
    await page.locator("#f-since").press("Enter")
    await page.locator("#no-runs").filter(has_text="since='soon': not a time").wait_for()
