"""The runs list by keyboard in headless Chromium: j/k (and the arrows) move a visible cursor
over the rows, Enter opens the run under it, x ticks its checkbox for a bulk action, and / puts
the focus in the search box; keys typed into a field are the field's."""

from __future__ import annotations

import pytest

import reactorflow as rf
from tests.browser.conftest import Dashboard, require_playwright
from tests.helpers import unique

require_playwright()
pytestmark = pytest.mark.slow


async def test_the_runs_list_is_worked_by_keyboard(dashboard: Dashboard) -> None:
    flow = rf.Reactor(unique("browser.keys"))

    @flow.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    older = await flow.run()
    newer = await flow.run()  # newest first: the first row
    page = dashboard.page
    await dashboard.sign_in()
    await page.locator(f"#runs tr[data-run='{older.id}']").wait_for()
    current = page.locator("#runs tbody tr.current")
    await page.keyboard.press("j")
    assert await current.get_attribute("data-run") == newer.id
    await page.keyboard.press("ArrowDown")
    assert await current.get_attribute("data-run") == older.id
    await page.keyboard.press("k")
    assert await current.get_attribute("data-run") == newer.id
    assert await page.locator("#runs tbody tr[aria-selected='true']").count() == 1
    await page.keyboard.press("x")  # ticks the row for a bulk action
    assert await page.locator(f"input.pick[data-run='{newer.id}']").is_checked()
    await page.keyboard.press("/")
    assert await page.evaluate("document.activeElement.id") == "search"
    await page.keyboard.type("jk")  # typed into the search box, not moving the cursor
    assert await page.locator("#search").input_value() == "jk"
    assert await current.get_attribute("data-run") == newer.id
    await page.locator("#search").fill("")
    await page.locator("body").click(position={"x": 5, "y": 5})
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"**?run={older.id}")
    await page.locator("#run-view").wait_for()
