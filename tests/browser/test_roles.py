"""A read-only token on the dashboard, in headless Chromium: it sees the run and its history
(with who did each operator action), and every action button is disabled, saying why; the
operate token of the same server acts, and the history names it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import reactorflow as rf
from reactorflow.web import create_app
from tests.browser.conftest import TOKEN, Dashboard, Server, require_playwright
from tests.browser.test_dashboard import _open_run, _status
from tests.operate.conftest import Shared
from tests.operate.flows import orders

expect = require_playwright().expect
pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("REACTORFLOW_TEST_SHOTS", "/tmp/reactorflow-shots"))
READ_TOKEN = "browser-read-token-3"
ACTIONS = ("Undo", "Cancel", "Retry", "Rewind", "Pause", "Resume")


@pytest.fixture
def server(shared: Shared) -> Iterator[Server]:
    """The app with an operate token (`TOKEN`, named "token") and a read one named viewer."""
    serving = Server(create_app(token=TOKEN,
                                tokens={"viewer": {"role": "read", "token": READ_TOKEN}}))
    try:
        yield serving
    finally:
        serving.stop()


async def _sign_in(board: Dashboard, token: str) -> None:
    await board.page.goto(board.url)
    await board.page.get_by_label("Token").fill(token)
    await board.page.get_by_role("button", name="Open").click()
    await board.page.locator("#list-view").wait_for()


async def test_a_read_token_sees_the_run_with_every_action_disabled(
        dashboard: Dashboard) -> None:
    paused = await orders.run(item="tea")
    await orders.cancel(paused.id, reason="wrong item", actor="ann")
    page = dashboard.page
    await _sign_in(dashboard, READ_TOKEN)
    await expect(page.locator("#session")).to_have_text(
        "token viewer (read only: your token may only read)")
    await _open_run(dashboard, paused.id)
    await _status(dashboard, "cancelled")
    cancelled = page.locator("#history tbody tr[data-kind='run.cancelled']")
    await expect(cancelled.locator("td.actor")).to_have_text("ann")
    for name in ACTIONS:
        button = page.locator("#actions").get_by_role("button", name=name, exact=True)
        await expect(button).to_be_disabled()
        assert await button.get_attribute("title") == "your token may only read"
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / "read-only-run.png"), full_page=True)

    waiting = await orders.run(item="gin")  # its interrupt's Continue is disabled too
    await _open_run(dashboard, waiting.id)
    await _status(dashboard, "paused")
    await expect(page.locator("form.interrupt button[type=submit]")).to_be_disabled()
    assert (await orders.get(waiting.id)).status is rf.Status.PAUSED


async def test_the_operate_token_acts_and_the_history_names_it(dashboard: Dashboard) -> None:
    paused = await orders.run(item="tea")
    page = dashboard.page
    await _sign_in(dashboard, TOKEN)
    await expect(page.locator("#session")).to_have_text("token token")
    await _open_run(dashboard, paused.id)
    await _status(dashboard, "paused")
    cancel = page.locator("#actions").get_by_role("button", name="Cancel", exact=True)
    await expect(cancel).to_be_enabled()
    await cancel.click()  # confirmed (the fixture accepts every dialog)
    await _status(dashboard, "cancelled")
    cancelled = page.locator("#history tbody tr[data-kind='run.cancelled']")
    await expect(cancelled.locator("td.actor")).to_have_text("token")
    assert [(e.kind, e.actor) for e in (await orders.get(paused.id)).history if e.actor] == [
        ("run.cancelled", "token")]
