"""Named tokens with roles (api.md §16) through the real app: a `read` token sees runs and gets
403 on every change, `operate` may change, none or an unknown one is 401; sha256 entries; the
single `token=` is one operate token; a refused request is logged without the token's text; a
change is recorded in the run's history under the token's name."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.routing import Route

import reactorflow as rf
from reactorflow.web import create_app
from reactorflow.web.roles import TokenConfigError
from tests.operate.flows import approval, invoices, orders

READ = "SECRET-read-9f2c"
OPERATE = "SECRET-operate-41ab"
HASHED = "SECRET-hashed-77d0"
TOKENS = {"viewer": {"role": "read", "token": READ},
          "alice": {"role": "operate", "token": OPERATE},
          "ci": {"role": "operate", "sha256": hashlib.sha256(HASHED.encode()).hexdigest()}}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def http(storage: rf.Storage, monkeypatch: pytest.MonkeyPatch
               ) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.delenv("REACTORFLOW_DASHBOARD_TOKEN", raising=False)
    transport = httpx.ASGITransport(app=create_app(tokens=TOKENS))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


def mutating_routes() -> list[str]:
    """Every POST route of the app but the continue check (a read: it writes nothing)."""
    app = create_app(token="x")
    return [route.path for route in app.routes
            if isinstance(route, Route) and "POST" in (route.methods or ())
            and not route.path.endswith("/continue/check")]


async def test_a_read_token_reads_and_is_refused_every_change(
        http: httpx.AsyncClient) -> None:
    paused = await orders.run(item="tea")
    listed = await http.get("/api/runs", headers=bearer(READ))
    assert listed.status_code == 200 and [r["id"] for r in listed.json()["runs"]] == [paused.id]
    assert (await http.get(f"/api/runs/{paused.id}", headers=bearer(READ))).status_code == 200
    session = await http.get("/api/session", headers=bearer(READ))
    assert session.json() == {"token": "viewer", "role": "read"}
    routes = mutating_routes()
    assert len(routes) >= 10  # continue, undo, cancel, retry, repairs, schedules...
    for path in routes:
        url = path.replace("{run_id}", paused.id).replace("{target}", "ops.orders")
        refused = await http.post(url, headers=bearer(READ), json={})
        assert refused.status_code == 403, (path, refused.text)
        body = refused.json()
        assert body["error"] == "Forbidden"
        assert "token 'viewer' may only read" in body["message"]
        for headers in ({}, bearer("SECRET-unknown")):
            assert (await http.post(url, headers=headers, json={})).status_code == 401, path
    after = await orders.get(paused.id)
    assert after.status is rf.Status.PAUSED and after.history == paused.history  # untouched


async def test_an_operate_token_changes_and_is_named_in_the_history(
        http: httpx.AsyncClient) -> None:
    paused = await orders.run(item="tea")
    done = await http.post(f"/api/runs/{paused.id}/continue", headers=bearer(OPERATE),
                           json={"step": "approve", "payload": approval()})
    assert done.status_code == 200 and done.json()["status"] == "completed"
    undone = await http.post(f"/api/runs/{paused.id}/undo", headers=bearer(HASHED))
    assert undone.status_code == 200
    held = await invoices.run(customer="ACME")
    repaired = await http.post(f"/api/runs/{held.id}/skip-step", headers=bearer(OPERATE),
                               json={"step": "bill", "result": {"ref": "B-2", "amount": 4}})
    assert repaired.status_code == 200 and repaired.json()["status"] == "completed"
    other = await orders.run(item="gin")
    cancelled = await http.post(f"/api/runs/{other.id}/cancel", headers=bearer(HASHED),
                                json={"reason": "dup"})
    assert cancelled.status_code == 200
    shown = {run_id: [(e["kind"], e["actor"]) for e in
                      (await http.get(f"/api/runs/{run_id}", headers=bearer(READ))).json()[
                          "history"] if e["actor"]]
             for run_id in (paused.id, held.id, other.id)}
    assert shown == {paused.id: [("run.resumed", "alice"), ("run.undo_requested", "ci")],
                     held.id: [("run.repaired", "alice")],
                     other.id: [("run.cancelled", "ci")]}


async def test_the_single_token_is_one_operate_token_named_token(
        storage: rf.Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTORFLOW_DASHBOARD_TOKEN", raising=False)
    run = await orders.run(item="tea")
    transport = httpx.ASGITransport(app=create_app(token=OPERATE))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers=bearer(OPERATE)) as client:
        assert (await client.get("/api/session")).json() == {"token": "token",
                                                            "role": "operate"}
        assert (await client.post(f"/api/runs/{run.id}/cancel")).status_code == 200
    assert [(e.kind, e.actor) for e in (await orders.get(run.id)).history if e.actor] == [
        ("run.cancelled", "token")]


async def test_refused_requests_are_logged_without_the_token(
        http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture) -> None:
    paused = await orders.run(item="tea")
    caplog.set_level(logging.WARNING, logger="reactorflow.web")
    await http.get("/api/runs", headers=bearer("SECRET-guessed-0000"))
    await http.get("/api/runs")
    await http.post(f"/api/runs/{paused.id}/cancel", headers=bearer(READ))
    lines = [r.getMessage() for r in caplog.records if r.name == "reactorflow.web"]
    assert len(lines) == 3, lines
    assert all("SECRET" not in line for line in lines)
    assert all("client=127.0.0.1" in line for line in lines)
    assert "token=- reason=unknown_token request=GET /api/runs" in lines[0]
    assert "token=- reason=no_token" in lines[1]
    assert f"token=viewer reason=read_only request=POST /api/runs/{paused.id}/cancel" in lines[2]


@pytest.mark.parametrize(("tokens", "problem"), [
    ({"viewer": {"role": "admin", "token": READ}},
     "entry 'viewer': role 'admin' is not one of read, operate"),
    ({"viewer": {"role": "read"}},
     "entry 'viewer': no token: give token (the token's text) or sha256"),
    ({"viewer": {"role": "read", "token": READ, "sha256": "a" * 64}},
     "entry 'viewer': give token (the token's text) or sha256 (its SHA-256 hex digest), "
     "not both"),
    ({"viewer": {"role": "read", "sha256": "SECRET"}}, "entry 'viewer': sha256 must be 64 hex"),
    ({"viewer": {"role": "read", "token": READ}, "again": {"role": "operate", "token": READ}},
     "entry 'again': the same token as entry 'viewer'"),
    ({"viewer": "SECRET-plain"}, "entry 'viewer': give an object"),
])
def test_a_bad_tokens_mapping_is_one_line_naming_the_entry(
        tokens: dict[str, object], problem: str) -> None:
    with pytest.raises(TokenConfigError) as caught:
        create_app(tokens=tokens)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith("create_app(tokens=): ") and problem in message
    assert "\n" not in message and "SECRET" not in message
    assert caught.value.option == "tokens"


def test_the_single_token_may_not_share_a_name_or_a_token_with_a_named_one() -> None:
    with pytest.raises(TokenConfigError, match="entry 'token': the name is taken"):
        create_app(token="x", tokens={"token": {"role": "read", "token": "y"}})
    with pytest.raises(TokenConfigError, match="entry 'token': the same token as entry 'alice'"):
        create_app(token=OPERATE, tokens={"alice": {"role": "read", "token": OPERATE}})
