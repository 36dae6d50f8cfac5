"""The interrupt form: an untouched form cannot be sent (a required yes/no is an explicit choice,
a required text must be typed), the server checks the payload first without counting an
attempt, and the user confirms before anything is sent."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from tests.browser.conftest import Dashboard, require_playwright
from tests.browser.test_dashboard import _open_run, _status
from tests.operate.flows import signoffs

require_playwright()
pytestmark = pytest.mark.slow


async def test_an_untouched_form_cannot_be_sent(dashboard: Dashboard) -> None:
    paused = await signoffs.run()
    await dashboard.sign_in()
    await _open_run(dashboard, paused.id)
    page = dashboard.page
    form = page.locator("form[data-interrupt='sign']")
    approved = form.get_by_role("group", name="approved")
    assert await approved.get_by_role("radio").count() == 2  # yes, no: nothing chosen
    assert not await approved.get_by_label("no", exact=True).is_checked()
    assert await form.locator("input[type=checkbox]").count() == 0
    await form.get_by_role("button", name="Continue").click()
    await form.get_by_text("Fix the highlighted fields.").wait_for()
    await form.get_by_label("by").fill("ann")  # the yes/no is still unanswered
    await form.get_by_role("button", name="Continue").click()
    await form.get_by_text("Fix the highlighted fields.").wait_for()
    assert dashboard.dialogs == []  # nothing was asked, so nothing was sent
    run = await signoffs.get(paused.id)
    assert run.status is rf.Status.PAUSED and run.waiting_on == ["sign"]


async def test_sending_asks_first_and_a_refusal_sends_nothing(dashboard: Dashboard) -> None:
    paused = await signoffs.run()
    await dashboard.sign_in()
    await _open_run(dashboard, paused.id)
    form = dashboard.page.locator("form[data-interrupt='sign']")
    await form.get_by_role("group", name="approved").get_by_label("no", exact=True).check()
    await form.get_by_label("by").fill("ann")
    dashboard.confirm = False
    await form.get_by_role("button", name="Continue").click()
    await form.get_by_text("Not sent.").wait_for()
    assert len(dashboard.dialogs) == 1
    asked = dashboard.dialogs[0]
    assert asked.startswith(f"Continue run {paused.id} at interrupt sign with this payload?")
    assert '"approved": false' in asked and '"by": "ann"' in asked  # "no" is an explicit false
    assert (await signoffs.get(paused.id)).status is rf.Status.PAUSED

    dashboard.confirm = True
    await form.get_by_role("button", name="Continue").click()
    await _status(dashboard, "completed")
    done = await signoffs.get(paused.id)
    assert done.value == "rejected by ann" and len(dashboard.dialogs) == 2


class UniqueSignoff(msgspec.Struct):
    """A sign-off whose tags are each given once: a rule its JSON Schema does not state, so
    the form cannot check it and only the server refuses it (a wrong type, which the schema
    states, the form refuses itself: tests/browser/test_form_rules.py)."""

    approved: bool
    by: str
    tags: list[str] = []

    def __post_init__(self) -> None:
        if len(set(self.tags)) != len(self.tags):
            raise ValueError("each tag at most once")


unique_signoffs = rf.Reactor("ops.unique-signoffs")


@unique_signoffs.interrupt(max_attempts=2)
async def sign(payload: UniqueSignoff) -> UniqueSignoff:
    return payload


@unique_signoffs.step
async def record(sign: UniqueSignoff) -> str:
    return f"{'approved' if sign.approved else 'rejected'} by {sign.by}"


async def test_the_server_checks_first_without_counting_an_attempt(
        dashboard: Dashboard) -> None:
    paused = await unique_signoffs.run()  # its interrupt allows 2 attempts
    await dashboard.sign_in()
    await _open_run(dashboard, paused.id)
    form = dashboard.page.locator("form[data-interrupt='sign']")
    await form.get_by_role("group", name="approved").get_by_label("yes", exact=True).check()
    await form.get_by_label("by").fill("ann")
    await form.get_by_label("tags").fill('["urgent", "urgent"]')  # fits the schema, not the type
    for _ in range(3):  # each one would be an attempt if counted: the 2nd would fail the run
        await form.get_by_role("button", name="Continue").click()
        await form.get_by_text("checked only: nothing was sent and no attempt").wait_for()
        await form.locator("p.error").evaluate("node => { node.textContent = ''; }")
    assert dashboard.dialogs == []  # refused by the check: never asked, never sent
    assert (await unique_signoffs.get(paused.id)).status is rf.Status.PAUSED
    await form.get_by_label("tags").fill('["urgent"]')
    await form.get_by_role("button", name="Continue").click()
    await _status(dashboard, "completed")
    assert (await unique_signoffs.get(paused.id)).value == "approved by ann"
