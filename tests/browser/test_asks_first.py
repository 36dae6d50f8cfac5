"""Every action that changes a run asks first: each button of the dashboard that POSTs a change
(a run's undo, cancel, retry, retry step, skip step, rewind, pause, resume and interrupt
continue; the list's bulk cancel, undo, retry and resume; a schedule's pause and resume) asks
with a dialog naming what it will do and to which run(s) (or schedule), and answered "no" it
sends nothing: no change request leaves the page (counted with page.on("request")) and the run
is as it was."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

import reactorflow as rf
from reactorflow import config
from tests.browser.conftest import Dashboard, require_playwright
from tests.browser.test_dashboard import _fill_approval, _open_run, _status
from tests.operate.flows import BILLING_FIXED_ENV, invoices, orders, reminders

require_playwright()
pytestmark = pytest.mark.slow

Act = Callable[[Dashboard], Awaitable[None]]


def _button(name: str) -> Act:
    async def click(board: Dashboard) -> None:
        await board.page.get_by_role("button", name=name, exact=True).click()
    return click


async def _continue(board: Dashboard) -> None:
    await _fill_approval(board.page.locator("form[data-interrupt='approve']"))


async def _skip(board: Dashboard) -> None:
    await board.page.get_by_role("button", name="Skip step").click()
    form = board.page.locator("form[data-skip='bill']")
    await form.get_by_label("ref").fill("M-7")
    await form.get_by_label("amount").fill("4")
    await form.get_by_role("button", name="Skip step").click()


async def _rewind(board: Dashboard) -> None:
    await board.page.get_by_role("button", name="Rewind", exact=True).click()
    form = board.page.locator("form[data-rewind]")
    await form.get_by_label("to step").select_option("bill")
    await form.get_by_label("changed inputs").fill('{"amount": 20.0}')
    await form.get_by_role("button", name="Rewind").click()


async def _paused_order() -> rf.Run:
    return await orders.run(item="tea")


async def _cancelled_order() -> rf.Run:
    return await orders.cancel((await orders.run(item="tea")).id)


async def _held_invoice() -> rf.Run:
    return await invoices.run(customer="ACME")


async def _completed_invoice() -> rf.Run:
    return await invoices.run(customer="ACME")  # (the test deploys the fix first)


async def _sleeping_reminder() -> rf.Run:
    return await reminders.run(order_id="A9")


async def _paused_reminder() -> rf.Run:
    return await reminders.pause((await reminders.run(order_id="A9")).id, reason="audit")


@dataclass(frozen=True)
class RunAction:
    name: str
    make: Callable[[], Awaitable[rf.Run]]
    act: Act
    asks: str  # what the dialog starts with, "{id}" the run's id


RUN_ACTIONS = [
    RunAction("undo", _paused_order, _button("Undo"),
              "Undo (roll back every completed step of) run {id}?"),
    RunAction("cancel", _paused_order, _button("Cancel"), "Cancel run {id}?"),
    RunAction("retry", _cancelled_order, _button("Retry"),
              "Retry (start a new run with the inputs of) run {id}?"),
    RunAction("retry-step", _held_invoice, _button("Retry step"),
              "Retry step bill (run it again with the code now deployed) of run {id}?"),
    RunAction("skip-step", _held_invoice, _skip, "Skip step bill of run {id} with this result?"),
    RunAction("rewind", _completed_invoice, _rewind, "Rewind run {id} to step bill (undo it"),
    RunAction("pause", _sleeping_reminder, _button("Pause"),
              "Pause run {id}? It stops at its next step boundary"),
    RunAction("resume", _paused_reminder, _button("Resume"), "Resume (take on again) run {id}?"),
    RunAction("continue", _paused_order, _continue,
              "Continue run {id} at interrupt approve with this payload?"),
]


def _writes_nothing(request: Any) -> bool:
    """A read, the continue form's check, or the bulk bar's dry run counting what matches."""
    return (request.method == "GET" or request.url.endswith("/continue/check")
            or '"dry_run":true' in (request.post_data or ""))


def _changes_sent(board: Dashboard) -> list[str]:
    """The change requests the page sends from now on."""
    sent: list[str] = []
    board.page.on("request", lambda r: None if _writes_nothing(r)
                  else sent.append(f"{r.method} {r.url}"))
    return sent


async def _answered_no(board: Dashboard, act: Act) -> None:
    board.confirm = False
    async with board.page.expect_event("dialog"):
        await act(board)
    await board.page.wait_for_timeout(500)  # a request sent after the answer would be seen


@pytest.mark.parametrize("action", RUN_ACTIONS, ids=[a.name for a in RUN_ACTIONS])
async def test_each_run_action_asks_first_and_no_sends_nothing(
        dashboard: Dashboard, action: RunAction, monkeypatch: pytest.MonkeyPatch) -> None:
    if action.name == "rewind":
        monkeypatch.setenv(BILLING_FIXED_ENV, "1")
    run = await action.make()
    reactor = {"ops.orders": orders, "ops.invoices": invoices,
               "ops.reminders": reminders}[run.reactor]
    await dashboard.sign_in()
    await _open_run(dashboard, run.id)
    await _status(dashboard, run.status.value)
    sent = _changes_sent(dashboard)
    await _answered_no(dashboard, action.act)
    assert len(dashboard.dialogs) == 1
    assert dashboard.dialogs[0].startswith(action.asks.format(id=run.id)), dashboard.dialogs
    assert sent == []
    after = await reactor.get(run.id)
    assert (after.status, after.waiting_on, after.updated_at) == (
        run.status, run.waiting_on, run.updated_at)
    if run.status in (rf.Status.RUNNING, rf.Status.PAUSED):
        await reactor.cancel(run.id)  # (a sleeping reminder left for no one)


@pytest.mark.parametrize("verb", ["cancel", "undo", "retry", "resume"])
async def test_each_bulk_action_names_its_runs_and_no_sends_nothing(
        dashboard: Dashboard, verb: str) -> None:
    runs = [await orders.run(item=f"b{n}") for n in range(2)]
    page = dashboard.page
    await dashboard.sign_in()
    for run in runs:
        await page.locator(f"#runs tr[data-run='{run.id}'] input.pick").check()
    await page.locator("#bulk-count", has_text="2 run(s) selected").wait_for()
    sent = _changes_sent(dashboard)

    async def act(board: Dashboard) -> None:
        await board.page.locator(f"#bulk-bar button[data-bulk='{verb}']").click()
    await _answered_no(dashboard, act)
    assert len(dashboard.dialogs) == 1 and sent == []
    asked = dashboard.dialogs[0]
    assert asked.startswith(verb.capitalize()), asked
    assert asked.endswith(f"2 selected run(s): {runs[0].id}, {runs[1].id}?"), asked
    assert [(await orders.get(r.id)).status for r in runs] == [rf.Status.PAUSED] * 2

    await page.get_by_role("button", name="Select all matching").click()
    await page.locator("#bulk-count", has_text="All 2 matching run(s) selected").wait_for()
    await _answered_no(dashboard, act)  # (the count was a dry run: no change)
    assert dashboard.dialogs[1].endswith("all 2 run(s) matching the list's filters (none: "
                                         "every run)?"), dashboard.dialogs
    assert sent == [] and page.url == dashboard.url
    assert [(await orders.get(r.id)).status for r in runs] == [rf.Status.PAUSED] * 2


async def test_a_schedule_toggle_asks_first_and_no_sends_nothing(dashboard: Dashboard) -> None:
    from tests.browser.test_schedules import KEY, _scheduled

    await _scheduled()
    await dashboard.sign_in()
    row = dashboard.page.locator(f"#schedules tr[data-schedule='{KEY}']")
    await row.wait_for()
    sent = _changes_sent(dashboard)
    await _answered_no(dashboard, _row_button(row, "Pause"))
    assert dashboard.dialogs == [f"Pause schedule {KEY}?"] and sent == []
    state = await config.current_storage().schedule_load(KEY, None)
    assert state is not None and not state.paused


def _row_button(row: object, name: str) -> Act:
    async def click(board: Dashboard) -> None:
        await row.get_by_role("button", name=name).click()  # type: ignore[attr-defined]
    return click
