"""Checking a payload without sending it: `rf.validate_payload` (the schema only), and the
HTTP API's `POST /api/runs/{id}/continue/check` (the dashboard's form asks it first; the CLI's
`continue --check` is the same check), which refuses what `continue` would and counts no
attempt."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

import reactorflow as rf
from reactorflow.web import create_app
from tests.helpers import unfired, unique, until_past
from tests.operate.flows import Approval, Signoff, approval, orders, signoffs

TOKEN = "check-token"


@pytest.fixture
async def client(storage: rf.Storage) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        yield http


def test_validate_payload_converts_a_good_payload_and_names_the_field_of_a_bad_one() -> None:
    checked = rf.validate_payload(orders, "approve", approval(amount=7))
    assert isinstance(checked, Approval) and checked.amount == 7
    with pytest.raises(rf.PayloadValidationError) as info:
        rf.validate_payload(signoffs, "sign", {"approved": True, "bu": "ann"})  # a typo
    error = info.value
    assert not error.counted and error.attempts == 0 and error.run_id is None
    assert error.field == "bu" and error.max_attempts == 2
    assert str(error).startswith("invalid payload for interrupt 'sign' of reactor "
                                 "'ops.signoffs': bu: an unknown field")
    assert "checked only: nothing was sent and no attempt (of the 2 it allows) was counted" in (
        str(error))
    with pytest.raises(rf.PayloadValidationError, match="by: a required field is missing"):
        rf.validate_payload(signoffs, "sign", {"approved": True})


def test_validate_payload_names_the_interrupts_when_the_step_is_not_one() -> None:
    with pytest.raises(rf.UnknownInterrupt) as info:
        rf.validate_payload(orders, "aprove", approval())
    assert info.value.interrupts == ["approve"] and info.value.reactor == "ops.orders"
    assert "reactor 'ops.orders' has no interrupt 'aprove'; its interrupts: 'approve'" in str(
        info.value)
    with pytest.raises(rf.UnknownInterrupt):
        rf.validate_payload(orders, "ship", approval())  # a step, not an interrupt


def test_validate_payload_takes_the_path_of_a_nested_interrupt() -> None:
    child = rf.Reactor(unique("child"))

    @child.interrupt
    async def confirm(payload: Signoff) -> Signoff:
        return payload

    parent = rf.Reactor(unique("parent"))

    @parent.compose(child)
    async def fulfil() -> None:
        return None

    checked = rf.validate_payload(parent, ("fulfil", "confirm"), {"approved": False, "by": "b"})
    assert checked == Signoff(False, "b")
    with pytest.raises(rf.PayloadValidationError) as info:
        rf.validate_payload(parent, ["fulfil", "confirm"], {"approved": "maybe", "by": "b"})
    assert info.value.label == ("fulfil", "confirm") and info.value.field == "approved"


async def test_the_check_counts_no_attempt_and_sends_nothing(client: httpx.AsyncClient) -> None:
    paused = await signoffs.run()  # its interrupt allows 2 attempts
    check = f"/api/runs/{paused.id}/continue/check"
    for _ in range(3):  # counted, the second would have failed the run
        refused = await client.post(check, json={"step": "sign", "payload": {"approved": True}})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"] == "PayloadValidationError"
        assert "by: a required field is missing (checked only" in refused.json()["message"]
    ok = await client.post(check, json={"step": ["sign"],
                                        "payload": {"approved": False, "by": "ann"}})
    assert ok.status_code == 200, ok.text
    assert ok.json() == {"ok": True, "run_id": paused.id, "step": ["sign"],
                         "payload": {"approved": False, "by": "ann", "tags": []}}
    run = await signoffs.get(paused.id)
    assert run.status is rf.Status.PAUSED and run.waiting_on == ["sign"]  # nothing was sent
    bad = await client.post(f"/api/runs/{paused.id}/continue",
                            json={"step": "sign", "payload": {"approved": True}})
    assert "attempt 1 of 2" in bad.json()["message"]  # continue counts: the first attempt
    wrong = await client.post(check, json={"step": "record", "payload": {}})
    assert wrong.status_code == 409 and wrong.json()["error"] == "InterruptNotPending"
    done = await client.post(f"/api/runs/{paused.id}/continue",
                             json={"step": "sign", "payload": {"approved": True, "by": "ann"}})
    assert done.json()["value"] == "approved by ann"
    again = await client.post(check, json={"step": "sign", "payload": {"approved": True,
                                                                        "by": "ann"}})
    assert again.status_code == 409 and again.json()["error"] == "AlreadyResumed"


async def test_the_check_of_an_expired_interrupt_writes_nothing(
        client: httpx.AsyncClient) -> None:
    flow = rf.Reactor(unique("expiring"))

    @flow.interrupt(timeout=0.5)
    async def approve(payload: bool) -> bool:
        return payload

    paused = await flow.run()
    await unfired(paused)  # nothing else noticed the deadline: the check is the first
    await until_past(paused.timeout_at)
    refused = await client.post(f"/api/runs/{paused.id}/continue/check",
                                json={"step": "approve", "payload": True})
    assert refused.status_code == 409 and refused.json()["error"] == "InterruptExpired"
    assert "will be rolled back" in refused.json()["message"]
    assert (await flow.get(paused.id)).status is rf.Status.PAUSED  # the check wrote nothing
    with pytest.raises(rf.InterruptExpired) as info:
        await flow.continue_(paused.id, step="approve", payload=True)
    assert info.value.rolled_back
    assert (await flow.get(paused.id)).status is rf.Status.FAILED
