"""The run graph laid out by dagre (reactorflow/web/static/vendor/dagre.min.js, drawn by
graph.js) in headless Chromium, for a 40-step reactor with a composed child and an inline map
held in flight: measured from the SVG geometry in the page, no edge segment crosses a step's
box, every label lies inside its box, "Fit" puts the whole graph in view, the map is one node
with its elements' progress, the composed child is a group around its steps; the wheel zooms
and a drag pans. A screenshot is saved (docs/img/dashboard-graph.png with
REACTORFLOW_DOCS_SCREENSHOTS=1, else beside the test's temporary files) and looked at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

import reactorflow as rf
from tests.browser import graph_flows as flows
from tests.browser.conftest import Dashboard, require_playwright, screenshot_dir

require_playwright()
pytestmark = pytest.mark.slow

GEOMETRY = (Path(__file__).parent / "graph_geometry.js").read_text()
"""Nodes, groups, labels (with their box) and edges (their points) in screen pixels."""


def _segment_hits(a: list[float], b: list[float], r: dict[str, float]) -> bool:
    """Whether segment a-b passes through the inside of rectangle r (Liang-Barsky clipping)."""
    x0, y0, dx, dy = a[0], a[1], b[0] - a[0], b[1] - a[1]
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, x0 - r["x"]), (dx, r["x"] + r["w"] - x0), (-dy, y0 - r["y"]),
                 (dy, r["y"] + r["h"] - y0)):
        if p == 0:
            if q <= 0:
                return False
            continue
        t = q / p
        if p < 0:
            lo = max(lo, t)
        else:
            hi = min(hi, t)
        if lo >= hi:
            return False
    return True


def _inside(inner: dict[str, float], outer: dict[str, float], slack: float = 0.5) -> bool:
    return (inner["x"] >= outer["x"] - slack and inner["y"] >= outer["y"] - slack
            and inner["x"] + inner["w"] <= outer["x"] + outer["w"] + slack
            and inner["y"] + inner["h"] <= outer["y"] + outer["h"] + slack)


def _shrunk(r: dict[str, float], by: float) -> dict[str, float]:
    return {"x": r["x"] + by, "y": r["y"] + by, "w": r["w"] - 2 * by, "h": r["h"] - 2 * by}


async def _run_id() -> str:
    with anyio.fail_after(20):
        while True:
            page = await rf.list_runs(reactor=flows.big.name)
            if page.runs:
                return page.runs[0].id
            await anyio.sleep(0.05)


async def test_a_40_step_graph_is_laid_out_readably(dashboard: Dashboard, tmp_path: Path
                                                      ) -> None:
    flows.GATE["open"] = anyio.Event()
    page = dashboard.page
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: flows.big.run(items=flows.ITEMS))
        run_id = await _run_id()
        await dashboard.sign_in()
        await page.goto(f"{dashboard.url}?run={run_id}")
        # the map: one node, its bar at 2 done, 1 failed, 2 running of 6 (the window is 2)
        bar = page.locator("#graph g[data-step='ship'] .map-progress[data-done='2']"
                           "[data-failed='1'][data-running='2'][data-total='6']")
        await bar.wait_for()
        counts = await bar.locator("text").text_content()
        assert counts == "2 done \u00b7 1 failed \u00b7 2 running of 6"
        assert await page.locator("#graph g[data-step^='ship.']").count() == 0
        await page.get_by_role("button", name="Fit").click()
        found: dict[str, Any] = await page.evaluate(GEOMETRY)

        assert len(found["nodes"]) == flows.STEPS - 1  # the composed step is the group
        assert set(found["groups"]) == {"verify"}
        group = found["groups"]["verify"]
        inside = [k for k in found["nodes"] if k.startswith("verify.")]
        assert len(inside) == 6
        assert all(_inside(found["nodes"][k], group) for k in inside)
        assert not any(_segment_hits([r["x"], r["y"]], [r["x"] + r["w"], r["y"] + r["h"]],
                                     _shrunk(group, 1))
                       for k, r in found["nodes"].items() if k not in inside)
        for step, r in found["nodes"].items():  # after "Fit": all of it in view
            assert _inside(r, found["view"]), step
        for label in found["labels"]:
            assert _inside(label["box"], label["owner"], 1.0), label
        cut = [lb for lb in found["labels"] if lb["step"].startswith("check_a_step")]
        assert cut and cut[0]["text"].endswith("\u2026")  # cut to fit
        title = page.locator("#graph g[data-step^='check_a_step'] > title")
        assert (await title.text_content() or "").startswith(
            "check_a_step_with_a_rather_long_name_that_cannot_fit_in_its_box")
        assert len(found["edges"]) == 47  # into (out of) the group: to its first (from its last)
        for edge in found["edges"]:
            for a, b in zip(edge["points"], edge["points"][1:], strict=False):
                for step, r in found["nodes"].items():
                    if step in (edge["from"], edge["to"]):
                        continue
                    assert not _segment_hits(a, b, _shrunk(r, 1)), (edge, step)

        shot = screenshot_dir(tmp_path)
        await page.locator("#graph").screenshot(path=str(shot / "dashboard-graph.png"))

        # zoom with the wheel, pan by dragging, fit again
        svg = page.locator("#graph")
        fitted = float(await svg.get_attribute("data-zoom") or 0)
        await svg.hover()
        await page.mouse.wheel(0, -400)
        zoomed = float(await svg.get_attribute("data-zoom") or 0)
        assert zoomed > fitted
        before = await page.locator("#graph g.viewport").get_attribute("transform")
        await page.mouse.down()
        await page.mouse.move(300, 300, steps=4)
        await page.mouse.up()
        assert await page.locator("#graph g.viewport").get_attribute("transform") != before
        await page.get_by_role("button", name="Fit").click()
        assert float(await svg.get_attribute("data-zoom") or 0) == pytest.approx(fitted)

        flows.GATE["open"].set()
    done = await rf.get_run(run_id)
    assert done.status is rf.Status.COMPLETED
