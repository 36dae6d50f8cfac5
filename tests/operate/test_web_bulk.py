"""`POST /api/runs:bulk` against the real app (httpx), on both backends: each run's outcome,
a dry run that writes nothing, 400 `{"error", "message"}` for a bad action, a bad filter or no
filter (nothing changes), and the write guard (a token is needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

import reactorflow as rf
from reactorflow.web import create_app
from tests.operate.flows import orders

TOKEN = "bulk-token-5"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(storage: rf.Storage) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers=AUTH) as http:
        yield http


async def _statuses(*runs: rf.Run) -> list[str]:
    return [(await orders.get(r.id)).status.value for r in runs]


async def test_a_bulk_cancel_reports_each_run(client: httpx.AsyncClient) -> None:
    paused = [await orders.run(item=f"p{n}") for n in range(3)]
    failed = await orders.run(item="gin", fail=True)
    response = await client.post("/api/runs:bulk", json={
        "action": "cancel", "filter": {"reactor": "ops.orders"}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["matched"] == 4
    by_id = {r["id"]: r for r in body["runs"]}
    assert set(by_id) == {r.id for r in [*paused, failed]}
    assert by_id[failed.id]["ok"] is False and by_id[failed.id]["status"] == "failed"
    assert "cannot cancel" in by_id[failed.id]["error"]
    for run in paused:
        assert by_id[run.id] == {"id": run.id, "ok": True, "status": "cancelled",
                                 "error": None}
    assert await _statuses(*paused) == ["cancelled"] * 3


async def test_a_dry_run_lists_the_runs_and_writes_nothing(client: httpx.AsyncClient) -> None:
    paused = [await orders.run(item=f"p{n}") for n in range(2)]
    response = await client.post("/api/runs:bulk", json={
        "action": "cancel", "filter": {"status": "paused"}, "dry_run": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["matched"] == 2 and body["dry_run"] is True
    assert {r["id"] for r in body["runs"]} == {r.id for r in paused}
    assert await _statuses(*paused) == ["paused", "paused"]


@pytest.mark.parametrize(("body", "field"), [
    ({"action": "cancel"}, "filter"),
    ({"action": "cancel", "filter": {}}, "filter"),
    ({"action": "explode", "filter": {"status": "paused"}}, "action"),
    ({"action": "cancel", "filter": {"status": "stuck"}}, "status"),
    ({"action": "cancel", "filter": {"since": "soon"}}, "since"),
    ({"action": "cancel", "filter": {"colour": "red"}}, "filter"),
    ({"action": "retry-step", "filter": {"status": "held"}}, "step"),
    ({"action": "cancel", "filter": {"status": "paused"}, "all": "yes"}, "all"),
])
async def test_a_bad_request_is_400_and_changes_nothing(
        client: httpx.AsyncClient, body: dict[str, object], field: str) -> None:
    paused = await orders.run(item="tea")
    response = await client.post("/api/runs:bulk", json=body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["error"] == "BulkSelectionError" and error["message"]
    assert error["fields"] == {"field": field}
    assert await _statuses(paused) == ["paused"]


async def test_all_true_acts_on_every_run(client: httpx.AsyncClient) -> None:
    paused = await orders.run(item="tea")
    response = await client.post("/api/runs:bulk", json={"action": "cancel", "all": True})
    assert response.status_code == 200 and response.json()["matched"] == 1
    assert await _statuses(paused) == ["cancelled"]


async def test_the_write_guard_applies(storage: rf.Storage) -> None:
    paused = await orders.run(item="tea")
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        response = await http.post("/api/runs:bulk", json={
            "action": "cancel", "filter": {"status": "paused"}})
    assert response.status_code == 401
    assert await _statuses(paused) == ["paused"]
