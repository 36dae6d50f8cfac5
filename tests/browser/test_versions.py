"""Versions on the dashboard in headless Chromium (api.md §14): the runs list has a version
column, a run's page says its version and what each migration did (its `run.migrated` event,
highlighted in the history), and draws the graph of the run's own version: a version 1 run
beside version 2 with version 1's graph, a version no module declares from the steps stored
with the run."""

from __future__ import annotations

import pytest

from tests.browser.conftest import DOCS_IMG, Dashboard, docs_screenshots, require_playwright
from tests.helpers import redeploy, unique
from tests.versions.flows import (
    V1_STEPS,
    V2_STEPS,
    Deployed,
    Order,
    migrated_run,
    version_1,
    version_2,
)

require_playwright()
pytestmark = pytest.mark.slow


async def _open_run(board: Dashboard, run_id: str, version: int, source: str) -> None:
    """Open a run's page and wait until its graph is drawn (`source`: the graph of its version
    declared here, or the one stored with the run)."""
    await board.page.goto(f"{board.url}?run={run_id}")
    await board.page.locator("#run-status .status").wait_for()
    await board.page.locator(
        f"#graph[data-version='{version}'][data-source='{source}'] g").first.wait_for()


async def _graph(board: Dashboard) -> list[str | None]:
    nodes = board.page.locator("#graph g[data-step]")
    return [await nodes.nth(i).get_attribute("data-step") for i in range(await nodes.count())]


async def _fact(board: Dashboard, name: str) -> str | None:
    return await board.page.locator(f"#facts dd[data-fact='{name}']").text_content()


async def test_a_migrated_run_shows_its_version_and_the_migration(dashboard: Dashboard) -> None:
    deployed = await migrated_run(unique("web.ver"))
    page = dashboard.page
    await dashboard.sign_in()
    for run_id, version in ((deployed.migrated, "2"), (deployed.v1_run, "1"),
                            (deployed.v2_run, "2")):
        cell = page.locator(f"#runs tr[data-run='{run_id}'] td.version")
        await cell.wait_for()
        assert await cell.text_content() == version
    assert await page.locator("#runs thead th:not(.pick)").nth(2).text_content() == "Version"

    await _open_run(dashboard, deployed.migrated, 2, "declared")
    assert await _fact(dashboard, "version") == "2"
    migrated = await _fact(dashboard, "migrated")
    assert migrated is not None
    assert migrated.startswith("version 1 \u2192 2: completed fraud_check (")
    row = page.locator("#history tr.migrated")
    assert await row.count() == 1 and await row.is_visible()
    cells = row.locator("td")
    assert await cells.nth(1).text_content() == "run.migrated"
    assert await cells.nth(4).text_content() == "version 1 \u2192 2: completed fraud_check"
    assert await _graph(dashboard) == V2_STEPS
    node = page.locator("#graph g[data-step='fraud_check']")
    assert "s-completed" in (await node.get_attribute("class") or "").split()

    await _open_run(dashboard, deployed.v1_run, 1, "stored")  # version 1 is undeployed
    assert await _fact(dashboard, "version") == "1"
    assert await page.locator("#facts dd[data-fact='migrated']").count() == 0
    assert await page.locator("#history tr.migrated").count() == 0
    assert await _graph(dashboard) == V1_STEPS


async def test_a_v1_run_beside_v2_is_drawn_with_v1s_graph(dashboard: Dashboard) -> None:
    name = unique("web.ver")
    v1 = version_1(name)
    old = await v1.run(Order("tea"))
    v2 = version_2(name, migration=False)
    fresh = await v2.run(Order("gin"))
    page = dashboard.page
    await dashboard.sign_in()
    await _open_run(dashboard, old.id, 1, "declared")
    assert await _fact(dashboard, "version") == "1"
    assert await _graph(dashboard) == V1_STEPS
    assert await page.locator("#graph path.edge").count() == 2  # reserve->approve->bill
    await page.locator("form[data-interrupt='approve'] button[type='submit']").wait_for()
    await _open_run(dashboard, fresh.id, 2, "declared")
    assert await _graph(dashboard) == V2_STEPS
    assert await page.locator("#graph path.edge").count() == 3


async def test_a_run_of_a_version_no_module_declares_is_drawn_from_its_stored_steps(
        dashboard: Dashboard) -> None:
    name = unique("web.ver")
    v1 = version_1(name)
    old = await v1.run(Order("tea"))
    redeploy(v1)
    v2 = version_2(name, migration=False)
    assert v2.version == 2
    page = dashboard.page
    await dashboard.sign_in()
    await _open_run(dashboard, old.id, 1, "stored")
    assert await _fact(dashboard, "version") == "1"
    assert await _graph(dashboard) == V1_STEPS
    reserve = page.locator("#graph g[data-step='reserve']")
    assert "s-completed" in (await reserve.get_attribute("class") or "").split()


@docs_screenshots
async def test_screenshot_for_the_docs(dashboard: Dashboard) -> None:
    """docs/img/dashboard-run-migrated.png, taken from the real browser."""
    deployed: Deployed = await migrated_run("shop.checkout")
    await dashboard.sign_in()
    await _open_run(dashboard, deployed.migrated, 2, "declared")
    await dashboard.page.locator("#history tr.migrated").wait_for()
    await dashboard.page.screenshot(path=str(DOCS_IMG / "dashboard-run-migrated.png"),
                                    full_page=True)
