"""The interrupt form of a pydantic payload (reactorflow[pydantic]): the dashboard renders the
schema pydantic describes (a nested model as a fieldset, its constraints as hints, no titles
made up from the field names), and what it sends is validated into the model."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

import reactorflow as rf
from tests.browser.conftest import Dashboard, require_playwright
from tests.browser.test_dashboard import _open_run, _status

require_playwright()
pytestmark = pytest.mark.slow


class Address(BaseModel):
    city: str
    zip: str = Field(min_length=5, max_length=5)


class Review(BaseModel):
    approved: bool
    reviewer: str
    score: int = Field(ge=1, le=5)
    address: Address


reviews = rf.Reactor("ops.pydantic-reviews")


@reviews.interrupt(max_attempts=3)
async def review(payload: Review) -> Review:
    return payload


@reviews.step
async def verdict(review: Review) -> str:
    assert type(review) is Review and type(review.address) is Address
    state = "approved" if review.approved else "rejected"
    return f"{state} by {review.reviewer} ({review.score}) in {review.address.city}"


async def test_a_pydantic_payload_renders_its_form_and_is_validated(dashboard: Dashboard) -> None:
    paused = await reviews.run()
    await dashboard.sign_in()
    await _open_run(dashboard, paused.id)
    form = dashboard.page.locator("form[data-interrupt='review']")
    await form.get_by_role("group", name="approved").get_by_label("yes", exact=True).check()
    await form.get_by_label("reviewer").fill("ann")
    score = form.get_by_label("score")
    assert await score.get_attribute("type") == "number"
    assert await score.get_attribute("min") == "1" and await score.get_attribute("max") == "5"
    address = form.get_by_role("group", name="Address")  # the nested model: a fieldset
    await address.get_by_label("city").fill("Lyon")
    zip_code = address.get_by_label("zip")
    assert await zip_code.get_attribute("minlength") == "5"
    await zip_code.fill("69001")
    await score.fill("4")
    await form.get_by_role("button", name="Continue").click()
    await _status(dashboard, "completed")
    done = await reviews.get(paused.id)
    assert done.value == "approved by ann (4) in Lyon"
    assert len(dashboard.dialogs) == 1 and '"zip": "69001"' in dashboard.dialogs[0]
