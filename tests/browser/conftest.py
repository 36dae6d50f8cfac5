"""Browser tests: the dashboard served by uvicorn (in a thread of the test process, on the
suite's Redis in a namespace of the test's own) and driven by Playwright in headless Chromium.

Chromium comes from the system (Debian's `chromium` package at /usr/bin/chromium): nothing is
downloaded at run time. Without it, or without Playwright, these tests skip saying what to
install.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from reactorflow.web import create_app
from tests.operate.conftest import Shared, shared

__all__ = ["shared"]  # the operating tests' fixture: a Redis namespace of the test's own

CHROMIUM = os.environ.get("REACTORFLOW_CHROMIUM") or shutil.which("chromium") or shutil.which(
    "chromium-browser")
TOKEN = "browser-token-7"

SKIP_REASON = ("chromium is not installed: apt-get install chromium (the Debian package; "
               "or set REACTORFLOW_CHROMIUM to a Chromium executable)")
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
"""The docs' screenshots, refreshed by the browser tests with REACTORFLOW_DOCS_SCREENSHOTS=1."""
docs_screenshots = pytest.mark.skipif(not os.environ.get("REACTORFLOW_DOCS_SCREENSHOTS"),
                                      reason="set REACTORFLOW_DOCS_SCREENSHOTS=1 to refresh "
                                      "docs/img")
"""Marks a test that only refreshes the docs' screenshots."""


def require_playwright() -> Any:
    """`playwright.async_api`, for a browser test module to call as it is imported: without
    Chromium or Playwright the module is skipped, saying what to install."""
    if CHROMIUM is None:
        pytest.skip(SKIP_REASON, allow_module_level=True)
    return pytest.importorskip("playwright.async_api",
                               reason="playwright is not installed: pip install playwright")


def screenshot_dir(tmp_path: Path) -> Path:
    """Where a test saves the screenshots it looks at: docs/img with
    REACTORFLOW_DOCS_SCREENSHOTS=1 (to refresh the docs), else beside its temporary files."""
    return DOCS_IMG if os.environ.get("REACTORFLOW_DOCS_SCREENSHOTS") else tmp_path


class Server:
    """uvicorn serving the app on a free loopback port, in a thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0,
                                                    log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def start(self) -> str:
        self.thread.start()
        with anyio.fail_after(20):
            while not self.server.started:  # uvicorn offers no event to wait on
                await anyio.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)


@dataclass
class Dashboard:
    url: str
    page: Any  # playwright Page
    dialogs: list[str] = field(default_factory=list)
    confirm: bool = True  # how the next confirmations are answered

    async def sign_in(self) -> None:
        await self.page.goto(self.url)
        await self.page.get_by_label("Token").fill(TOKEN)
        await self.page.get_by_role("button", name="Open").click()
        await self.page.locator("#list-view").wait_for()


@pytest.fixture
def server(shared: Shared, request: pytest.FixtureRequest) -> Iterator[Server]:
    """The app with the token (parametrize indirectly with None for a server without one)."""
    serving = Server(create_app(token=getattr(request, "param", TOKEN)))
    try:
        yield serving
    finally:
        serving.stop()


@pytest.fixture
async def dashboard(server: Server) -> AsyncIterator[Dashboard]:
    from playwright.async_api import async_playwright

    url = await server.start()
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            board = Dashboard(url, page)

            async def answer(dialog: Any) -> None:
                board.dialogs.append(dialog.message)
                await (dialog.accept() if board.confirm else dialog.dismiss())

            page.on("dialog", answer)
            yield board
        finally:
            await browser.close()
