"""Repairing a held run over HTTP, on both backends: the `held` status filter, `retry-step`
and `skip-step` (a refusal 409 with the error's structured fields, a result of the wrong type
422 naming the field, a bad body 422 naming what is missing), the token rules, and the JSON
Schema of a step's return type that the dashboard's skip-step form is generated from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import reactorflow as rf
from reactorflow.web import create_app
from tests.operate.flows import BILLING_FIXED_ENV, Bill, invoices, orders, reminders

TOKEN = "repair-token-3"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(storage: rf.Storage) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers=AUTH) as http:
        yield http


def _error(response: httpx.Response, code: int, kind: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] == kind and {"error", "message"} <= set(body) <= {"error", "message",
                                                                          "fields"}
    return body


async def _held() -> rf.Run:
    run = await invoices.run(customer="ACME")
    assert run.status is rf.Status.HELD
    return run


async def test_held_runs_are_filtered_and_retried_after_the_fix(
        client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    held = await _held()
    await orders.run(item="tea")  # paused
    page = (await client.get("/api/runs", params={"status": "held"})).json()
    assert [r["id"] for r in page["runs"]] == [held.id]
    assert page["runs"][0]["status"] == "held" and page["runs"][0]["error"]["step"] == "bill"

    again = await client.post(f"/api/runs/{held.id}/retry-step", json={"step": "bill"})
    assert again.status_code == 200 and again.json()["status"] == "held"  # still broken
    monkeypatch.setenv(BILLING_FIXED_ENV, "1")  # the fix is deployed
    done = await client.post(f"/api/runs/{held.id}/retry-step", json={"step": ["bill"]})
    assert done.status_code == 200, done.text
    run = done.json()
    assert run["id"] == held.id and run["status"] == "completed"
    assert run["value"] == "receipt B-1 for 12.5" and set(run) == set(rf.Run.__struct_fields__)


async def test_skip_step_validates_the_result_and_refusals_carry_their_fields(
        client: httpx.AsyncClient) -> None:
    held = await _held()
    before = await invoices.get(held.id)
    wrong = _error(await client.post(f"/api/runs/{held.id}/skip-step",
                                     json={"step": "bill", "result": {"ref": "M", "amount": -1}}),
                   422, "ResultValidationError")
    assert wrong["fields"] == {"run_id": held.id, "step": "bill", "field": "amount"}
    assert "amount" in wrong["message"] and "nothing was written" in wrong["message"]
    missing = _error(await client.post(f"/api/runs/{held.id}/skip-step", json={"step": "bill"}),
                     422, "BadRequest")
    assert 'give "result"' in missing["message"]
    assert f"/api/runs/{held.id}/steps/bill/schema" in missing["message"]
    no_step = _error(await client.post(f"/api/runs/{held.id}/retry-step", json={"step": 3}),
                     422, "BadRequest")
    assert 'give "step"' in no_step["message"]
    _error(await client.post(f"/api/runs/{held.id}/retry-step", content=b"{nope"), 422,
           "BadRequest")
    not_failed = _error(await client.post(f"/api/runs/{held.id}/retry-step",
                                          json={"step": "draft"}), 409, "StepNotFailed")
    assert not_failed["fields"] == {"run_id": held.id, "step": "draft",
                                    "step_status": "completed", "failed": "bill"}
    assert await invoices.get(held.id) == before  # the refusals wrote nothing

    done = await client.post(f"/api/runs/{held.id}/skip-step",
                             json={"step": "bill", "result": {"ref": "M-7", "amount": 3.0}})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    assert (await invoices.get(held.id)).steps["bill"].result == Bill("M-7", 3.0)
    refused = _error(await client.post(f"/api/runs/{held.id}/retry-step", json={"step": "bill"}),
                     409, "RunStateError")
    assert refused["fields"] == {"run_id": held.id, "status": "completed",
                                 "operation": "retry_step"}
    assert f"cannot retry_step run '{held.id}': it is completed" in refused["message"]
    _error(await client.post("/api/runs/nope/skip-step", json={"step": "bill", "result": 1}),
           404, "RunNotFound")


async def test_repairs_need_the_token(storage: rf.Storage,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    held = await _held()
    monkeypatch.delenv("REACTORFLOW_DASHBOARD_TOKEN", raising=False)
    for token in (TOKEN, None):
        transport = httpx.ASGITransport(app=create_app(token=token))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            for action, body in (("retry-step", {"step": "bill"}),
                                 ("skip-step", {"step": "bill",
                                                "result": {"ref": "x", "amount": 1.0}})):
                headers = {"Authorization": "Bearer wrong"} if token else AUTH
                _error(await http.post(f"/api/runs/{held.id}/{action}", json=body,
                                       headers=headers), 401, "Unauthorized")
            schema = await http.get(f"/api/runs/{held.id}/steps/bill/schema", headers=AUTH)
            assert schema.status_code == 200  # a read: open, or with the token
    assert (await invoices.get(held.id)).status is rf.Status.HELD


async def test_a_steps_result_schema(client: httpx.AsyncClient) -> None:
    held = await _held()
    answer = (await client.get(f"/api/runs/{held.id}/steps/bill/schema")).json()
    assert answer["run_id"] == held.id and answer["step"] == "bill"
    schema = answer["schema"]
    bill = schema["$defs"]["Bill"]
    assert schema["$ref"] == "#/$defs/Bill" and bill["required"] == ["ref", "amount"]
    assert bill["properties"]["amount"] == {"type": "number", "exclusiveMinimum": 0}
    text = (await client.get(f"/api/runs/{held.id}/steps/draft/schema")).json()["schema"]
    assert text == {"type": "string"}
    unknown = _error(await client.get(f"/api/runs/{held.id}/steps/nope/schema"), 404,
                     "NoSuchStep")
    assert "'nope'" in unknown["message"] and unknown["fields"]["reactor"] == "ops.invoices"
    _error(await client.get("/api/runs/nope/steps/bill/schema"), 404, "RunNotFound")


async def test_rewind_over_http(client: httpx.AsyncClient,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BILLING_FIXED_ENV, "1")
    done = await invoices.run(customer="ACME")
    assert done.status is rf.Status.COMPLETED
    _error(await client.post(f"/api/runs/{done.id}/rewind", json={}), 422, "BadRequest")
    bad = _error(await client.post(f"/api/runs/{done.id}/rewind",
                                   json={"to": "bill", "inputs": [1]}), 422, "BadRequest")
    assert '"inputs" must be an object' in bad["message"]
    unknown = _error(await client.post(f"/api/runs/{done.id}/rewind", json={"to": "nope"}),
                     422, "StepNotFound")
    assert unknown["fields"]["steps"] == ["draft", "bill", "mail"]
    wrong = _error(await client.post(f"/api/runs/{done.id}/rewind",
                                     json={"to": "bill", "inputs": {"amount": "lots"}}),
                   422, "InputValidationError")
    assert "amount" in wrong["message"]
    assert await invoices.get(done.id) == done  # the refusals wrote nothing
    rewound = await client.post(f"/api/runs/{done.id}/rewind",
                                json={"to": "bill", "inputs": {"amount": 20.0}})
    assert rewound.status_code == 200, rewound.text
    assert rewound.json()["value"] == "receipt B-1 for 20.0"
    failed = await orders.run(item="gin", fail=True)
    refused = _error(await client.post(f"/api/runs/{failed.id}/rewind", json={"to": "reserve"}),
                     409, "RunStateError")
    assert refused["fields"]["status"] == "failed" and refused["fields"]["operation"] == "rewind"


async def test_pause_and_resume_over_http(client: httpx.AsyncClient) -> None:
    asleep = await reminders.run(order_id="A8")
    _error(await client.post(f"/api/runs/{asleep.id}/pause", json={"reason": 5}), 422,
           "BadRequest")
    paused = await client.post(f"/api/runs/{asleep.id}/pause", json={"reason": "audit"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["status"] == "paused"
    assert paused.json()["paused_by"]["reason"] == "audit"
    again = _error(await client.post(f"/api/runs/{asleep.id}/pause"), 409, "RunStateError")
    assert again["fields"]["operation"] == "pause" and again["fields"]["status"] == "paused"
    resumed = await client.post(f"/api/runs/{asleep.id}/resume")
    assert resumed.status_code == 200 and resumed.json()["status"] == "running"
    twice = _error(await client.post(f"/api/runs/{asleep.id}/resume"), 409, "RunStateError")
    assert twice["fields"] == {"run_id": asleep.id, "status": "running", "operation": "resume"}
    await reminders.cancel(asleep.id)
