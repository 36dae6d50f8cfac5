"""Protected values on the dashboard in headless Chromium (api.md §17): runs stored by a process
holding a codec, read by a dashboard whose process holds none, show `"<encrypted>"` where the
values are (inputs, the run's result, a failed step's error message, its traceback, the
runs list's note) and nothing of the values themselves, while statuses, step names and the
graph read in full and the page raises no error; a forgotten subject's runs show `"<erased>"`,
an in-flight one cancelled with the reason "subject erased". Screenshots are saved
(docs/img/dashboard-run-encrypted.png and dashboard-run-erased.png with
REACTORFLOW_DOCS_SCREENSHOTS=1, else beside the test's temporary files) and looked at."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

import reactorflow as rf
from tests.browser.conftest import Dashboard, require_playwright, screenshot_dir
from tests.helpers import unique

require_playwright()
pytestmark = pytest.mark.slow
SECRET = "QWV-secret-51c9"
"""Only in the user values of the runs below: the page must never show it without the key."""


class Order(msgspec.Struct):
    customer_id: str
    card: str


def codec() -> rf.EncryptionCodec:
    return rf.EncryptionCodec(keys={"2026-12": os.urandom(32)}, current="2026-12")


def shop(*, subject: bool) -> rf.Reactor:
    """Charges the card (its result carries the secret), then ships, which raises with the
    secret in its message when the card says "decline"; then an interrupt waits for a
    confirmation (a run in flight)."""
    flow = rf.Reactor(unique("protected.shop"), inputs=Order,
                      subject="{customer_id}" if subject else None)

    @flow.step
    async def charge(customer_id: str, card: str) -> dict[str, str]:
        return {"charge": f"ch-{customer_id}", "card": card}

    @flow.step
    async def ship(charge: dict[str, str], card: str) -> str:
        if "decline" in card:
            raise ValueError(f"card {card} was declined")
        return f"shipped for {charge['charge']}"

    @flow.interrupt
    async def confirm(ship: str, payload: str) -> str:
        return f"{ship}, confirmed by {payload}"

    return flow


def watch_console(board: Dashboard) -> list[str]:
    """The page's JavaScript errors and console errors, as they happen."""
    seen: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error":
            seen.append(f"console: {message.text}")

    board.page.on("console", on_console)
    board.page.on("pageerror", lambda error: seen.append(f"pageerror: {error}"))
    return seen


async def _open_run(board: Dashboard, run_id: str) -> None:
    await board.page.goto(f"{board.url}?run={run_id}")
    await board.page.locator("#run-status .status").wait_for()
    await board.page.locator("#graph g[data-step='charge']").wait_for()
    await board.page.locator("#steps tr[data-step='charge']").wait_for()


async def _page_text(board: Dashboard) -> str:
    text = await board.page.evaluate("document.body.innerText")
    assert isinstance(text, str)
    return text


async def _shown_as(board: Dashboard, selector: str, word: str) -> None:
    """`selector` shows `word` ("encrypted", "erased") as a protected value: its text is
    `"<word>"`, marked so the page renders it as a badge, not as a JSON string."""
    node = board.page.locator(selector)
    assert await node.text_content() == f"<{word}>", selector
    assert await node.get_attribute("data-protected") == word, selector


async def _refused_for_its_values(board: Dashboard, word: str, *actions: str) -> None:
    """The page says why the run's values cannot be read, and the operations that need them
    are disabled, saying the same."""
    note = board.page.locator("#protected-note")
    assert await note.is_visible()
    said = await note.text_content()
    assert said is not None and f"<{word}>" in said
    for action in actions:
        button = board.page.locator(f"#actions button[data-action='{action}']")
        assert await button.is_disabled(), action
        assert await button.get_attribute("title") == said, action


async def test_a_dashboard_without_the_key_shows_encrypted(
        dashboard: Dashboard, tmp_path: Path) -> None:
    flow = shop(subject=False)
    rf.configure(codec=codec())
    done = await flow.run(customer_id=f"{SECRET}-ann", card=f"{SECRET}-4242")
    done = await flow.continue_(done.id, step="confirm", payload=f"{SECRET}-ann")
    failed = await flow.run(customer_id=f"{SECRET}-bob", card=f"{SECRET}-decline")
    paused = await flow.run(customer_id=f"{SECRET}-cid", card=f"{SECRET}-1111")
    assert (done.status, failed.status, paused.status) == (
        rf.Status.COMPLETED, rf.Status.FAILED, rf.Status.PAUSED)
    rf.configure(codec=None)  # the dashboard's process holds no key (same storage)
    assert (await rf.get_run(done.id)).inputs == "<encrypted>"

    page = dashboard.page
    await dashboard.sign_in()  # (its first request is refused, 401, until the token is given)
    errors = watch_console(dashboard)
    await page.locator(f"#runs tr[data-run='{failed.id}']").wait_for()
    listed = await _page_text(dashboard)
    assert SECRET not in listed
    note = await page.locator(f"#runs tr[data-run='{failed.id}'] td:last-child").text_content()
    assert note == "ship: ValueError: <encrypted>"
    assert await page.locator(f"#runs tr[data-run='{failed.id}'] td.note .protected"
                              ).get_attribute("data-protected") == "encrypted"

    await _open_run(dashboard, done.id)
    assert await page.locator("#run-status .status").text_content() == "completed"
    await _shown_as(dashboard, "#inputs", "encrypted")
    await _shown_as(dashboard, "#value", "encrypted")
    for step in ("charge", "ship", "confirm"):
        assert await page.locator(f"#steps tr[data-step='{step}'] .status").text_content() == (
            "completed")
    assert SECRET not in await _page_text(dashboard)

    await _open_run(dashboard, failed.id)
    await page.locator("#run-status .s-failed").wait_for()
    assert await page.locator("#error-text").text_content() == (
        "Step ship failed: ValueError: <encrypted>")
    assert await page.locator("#steps tr[data-step='ship'] td.note").text_content() == (
        "ValueError: <encrypted>")
    await _shown_as(dashboard, "#traceback", "encrypted")
    await _shown_as(dashboard, "#inputs", "encrypted")
    assert await page.locator("#graph g[data-step='ship'] text").first.text_content() == (
        "ship \u00b7 failed")
    assert SECRET not in await _page_text(dashboard)
    assert await page.locator("#message").text_content() == ""  # no error banner
    await _refused_for_its_values(dashboard, "encrypted", "retry", "undo", "rewind")

    await _open_run(dashboard, paused.id)
    form = page.locator("#interrupts form[data-interrupt='confirm']")
    await form.wait_for()  # no form to fill: continuing needs the key (the server refuses it)
    assert await form.locator("p.no-form").text_content() == (
        await page.locator("#protected-note").text_content())
    assert await form.get_by_role("button", name="Continue").count() == 0
    await _shown_as(dashboard, "#inputs", "encrypted")
    assert SECRET not in await _page_text(dashboard)
    assert await page.locator("#message").text_content() == ""
    shot = screenshot_dir(tmp_path)
    await _open_run(dashboard, failed.id)
    await page.screenshot(path=str(shot / "dashboard-run-encrypted.png"), full_page=True)
    assert errors == []


async def test_a_forgotten_subject_shows_erased(dashboard: Dashboard, tmp_path: Path) -> None:
    flow = shop(subject=True)
    rf.configure(codec=codec())
    customer = unique(f"{SECRET}-c")
    done = await flow.run(customer_id=customer, card=f"{SECRET}-4242")
    done = await flow.continue_(done.id, step="confirm", payload=f"{SECRET}-ann")
    waiting = await flow.run(customer_id=customer, card=f"{SECRET}-5555")
    other = await flow.run(customer_id=unique("someone-else"), card="visible-card-7")
    assert await rf.forget_subject(customer) == 2

    page = dashboard.page
    await dashboard.sign_in()  # (its first request is refused, 401, until the token is given)
    errors = watch_console(dashboard)
    await _open_run(dashboard, waiting.id)
    await page.locator("#run-status .s-cancelled").wait_for()
    assert await page.locator("#facts dd[data-fact='cancel-reason']").text_content() == (
        "subject erased")
    await _shown_as(dashboard, "#inputs", "erased")
    assert SECRET not in await _page_text(dashboard)
    await _refused_for_its_values(dashboard, "erased", "undo", "retry", "rewind")
    shot = screenshot_dir(tmp_path)
    await page.screenshot(path=str(shot / "dashboard-run-erased.png"), full_page=True)

    await _open_run(dashboard, done.id)
    await page.locator("#run-status .s-completed").wait_for()
    await _shown_as(dashboard, "#inputs", "erased")
    await _shown_as(dashboard, "#value", "erased")
    assert SECRET not in await _page_text(dashboard)

    await _open_run(dashboard, other.id)  # another subject's run reads in full
    await page.locator("#inputs", has_text="visible-card-7").wait_for()
    assert await page.locator("#inputs").get_attribute("data-protected") is None
    assert await page.locator("#protected-note").is_hidden()
    assert await page.locator("#actions button[data-action='cancel']").is_enabled()  # paused
    assert errors == []


class Basket(msgspec.Struct):
    owner: str
    items: list[str]


class Address(msgspec.Struct):
    street: str


def packing() -> rf.Reactor:
    """A map over the items (one fails: its outcome carries an error text) and a composed
    child, so a keyless page reads sealed map outcomes and a child's sealed inputs."""
    child = rf.Reactor(unique("protected.label"), inputs=Address)

    @child.step
    async def label(street: str) -> str:
        return f"label for {street}"

    flow = rf.Reactor(unique("protected.pack"), inputs=Basket)

    @flow.map_step(over="items", atomic=False)
    async def pack(item: str) -> str:
        if item.endswith("!"):
            raise ValueError(f"cannot pack {item}")
        return f"packed {item}"

    @flow.compose(child)
    async def address(owner: str) -> Address:
        return Address(f"{owner} street")

    @flow.step
    async def total(pack: list[rf.Outcome[str]], address: str) -> int:
        return len(pack)

    return flow


async def test_maps_and_children_read_without_the_key(dashboard: Dashboard) -> None:
    flow = packing()
    rf.configure(codec=codec())
    run = await flow.run(owner=f"{SECRET}-ann", items=[f"{SECRET}-a", f"{SECRET}-b!"])
    assert run.status is rf.Status.COMPLETED, run.error
    rf.configure(codec=None)

    page = dashboard.page
    await dashboard.sign_in()
    errors = watch_console(dashboard)
    await page.goto(f"{dashboard.url}?run={run.id}")
    await page.locator("#run-status .s-completed").wait_for()
    progress = page.locator("#graph g[data-step='pack'] .map-progress")
    await progress.wait_for()
    assert (await progress.get_attribute("data-total"), await progress.get_attribute(
        "data-done"), await progress.get_attribute("data-failed")) == ("2", "1", "1")
    await page.locator("#graph g[data-step='address.label']").wait_for()
    await _shown_as(dashboard, "#inputs", "encrypted")
    await _shown_as(dashboard, "#value", "encrypted")
    assert SECRET not in await _page_text(dashboard)
    assert await page.locator("#message").text_content() == ""
    assert errors == []
