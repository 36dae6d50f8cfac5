"""The HTTP API through an ASGI client, on both backends: every route, every error code, the
token rules, and server-sent events."""

from __future__ import annotations

import gc
import json
import sys
import types
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import msgspec
import pytest

import reactorflow as rf
from reactorflow.web import create_app
from tests.helpers import redeploy, unique
from tests.operate.flows import approval, orders

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(storage: rf.Storage) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers=AUTH) as http:
        yield http


def _error(response: httpx.Response, code: int, kind: str) -> str:
    assert response.status_code == code, response.text
    body = response.json()
    assert {"error", "message"} <= set(body) <= {"error", "message", "fields"}  # nothing else
    assert body["error"] == kind
    assert all(isinstance(v, str | int | float) for v in body.get("fields", {}).values())
    return str(body["message"])


async def test_list_and_read_runs(client: httpx.AsyncClient) -> None:
    paused = await orders.run(item="tea")
    failed = await orders.run(item="gin", fail=True)
    page = (await client.get("/api/runs")).json()
    assert [r["id"] for r in page["runs"]] == [failed.id, paused.id]
    only = (await client.get("/api/runs", params={"status": "failed", "limit": 1})).json()
    assert [r["id"] for r in only["runs"]] == [failed.id] and only["next_cursor"] is None
    first = (await client.get("/api/runs", params={"limit": 1})).json()
    rest = (await client.get("/api/runs", params={"cursor": first["next_cursor"]})).json()
    assert [r["id"] for r in rest["runs"]] == [paused.id]
    mine = (await client.get("/api/runs", params={"reactor": "ops.orders"})).json()
    assert len(mine["runs"]) == 2
    run = (await client.get(f"/api/runs/{paused.id}")).json()
    assert set(run) == set(rf.Run.__struct_fields__) | {"maps"}  # (+ the maps' progress)
    assert run["status"] == "paused" and run["waiting_on"] == ["approve"]
    assert run["inputs"] == {"item": "tea", "qty": 1, "fail": False}


async def test_reactors_give_the_graph_and_interrupt_schemas(client: httpx.AsyncClient) -> None:
    reactors = {r["name"]: r for r in (await client.get("/api/reactors")).json()["reactors"]}
    mine = reactors["ops.orders"]
    assert [(s["key"], s["kind"], s["deps"]) for s in mine["steps"]] == [
        ("reserve", "step", []), ("approve", "interrupt", ["reserve"]),
        ("ship", "step", ["reserve", "approve"])]
    schema = mine["interrupts"]["approve"]
    assert schema["$defs"]["Approval"]["properties"]["amount"] == {
        "type": "integer", "minimum": 1, "maximum": 100}
    assert mine["mermaid"].startswith("flowchart")


_GONE_MODULE = """
from __future__ import annotations
from datetime import datetime
import msgspec
import reactorflow as rf

class Booking(msgspec.Struct):
    starts_at: datetime

class Note(msgspec.Struct):
    written_at: datetime

booked = rf.Reactor(NAME, inputs=Booking)

@booked.interrupt
async def confirm(payload: Note) -> str:
    return "ok"

@booked.step
async def book(confirm: str) -> str:
    return confirm
"""


async def test_a_reactor_whose_types_cannot_be_resolved_leaves_the_listing_whole(
        client: httpx.AsyncClient) -> None:
    """A type whose string annotations name what its module no longer holds (the module is gone
    from sys.modules, as a script's or a reloaded module's is) has no JSON Schema: its form is
    not drawn (null), and the listing, the reactor and its other parts are still given."""
    module = types.ModuleType(unique("tests_gone_module").replace("-", "_"))
    unique_name = module.NAME = unique("web.booked")  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    exec(compile(_GONE_MODULE, module.__name__, "exec"), module.__dict__)
    booked: rf.Reactor = module.booked
    del sys.modules[module.__name__]
    response = await client.get("/api/reactors")
    assert response.status_code == 200, response.text
    listed = {r["name"]: r for r in response.json()["reactors"]}
    mine = listed[booked.name]
    assert mine["inputs"] is None and mine["interrupts"] == {"confirm": None}
    assert [s["key"] for s in mine["steps"]] == ["confirm", "book"]
    assert (await client.get(f"/api/reactors/{booked.name}")).json() == mine
    with pytest.raises(rf.DefinitionError, match="'datetime', which cannot be resolved"):
        booked.interrupt_schema("confirm")
    module.__dict__.clear()  # (the registry keeps reactors weakly: gone now, for later tests)
    del booked
    gc.collect()
    assert unique_name not in {r["name"] for r in
                               (await client.get("/api/reactors")).json()["reactors"]}


class Parcel(msgspec.Struct):
    item: str


class Crate(msgspec.Struct):
    items: list[str]


async def test_an_element_reactors_steps_are_in_the_graph_under_their_map(
        client: httpx.AsyncClient) -> None:
    """The dashboard draws the graph from these steps: an element reactor's steps sit under the
    map (`<map>.<step>`), marked with the map whose status they show."""
    packing = rf.Reactor(unique("web.packing"), inputs=Parcel)

    @packing.step
    async def box(item: str) -> str:
        return item

    @packing.step
    async def label(box: str) -> str:
        return box

    warehouse = rf.Reactor(unique("web.warehouse"), inputs=Crate)

    @warehouse.map_step(over="items", reactor=packing)
    async def pack_each(item: str) -> Parcel:
        return Parcel(item)

    reactors = {r["name"]: r for r in (await client.get("/api/reactors")).json()["reactors"]}
    steps = [(s["key"], s["deps"], s["level"], s.get("element_of"))
             for s in reactors[warehouse.name]["steps"]]
    assert steps == [("pack_each", [], "", None),
                     ("pack_each.box", [], "pack_each", "pack_each"),
                     ("pack_each.label", ["pack_each.box"], "pack_each", "pack_each")]


async def test_continue_undo_cancel_and_retry(client: httpx.AsyncClient) -> None:
    paused = await orders.run(item="tea")
    done = await client.post(f"/api/runs/{paused.id}/continue",
                             json={"step": "approve", "payload": approval()})
    assert done.status_code == 200 and done.json()["status"] == "completed"
    assert done.json()["value"] == "1xtea to Lyon"
    undone = await client.post(f"/api/runs/{paused.id}/undo")
    assert undone.json()["status"] == "cancelled"
    other = await orders.run(item="gin")
    cancelled = await client.post(f"/api/runs/{other.id}/cancel", json={"reason": "no need"})
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["cancel_reason"] == "no need"
    retried = await client.post(f"/api/runs/{other.id}/retry")
    assert retried.status_code == 200 and retried.json()["retried_from"] == other.id
    path = await client.post(f"/api/runs/{retried.json()['id']}/continue",
                             json={"step": ["approve"], "payload": approval(approved=False)})
    assert path.json()["value"] == "held"


async def test_error_codes(client: httpx.AsyncClient) -> None:
    assert "no run 'nope'" in _error(await client.get("/api/runs/nope"), 404, "RunNotFound")
    _error(await client.post("/api/runs/nope/cancel"), 404, "RunNotFound")
    _error(await client.get("/api/nothing"), 404, "NoRoute")
    _error(await client.get("/api/runs/x/continue"), 405, "NoRoute")
    paused = await orders.run(item="tea")
    message = _error(await client.post(f"/api/runs/{paused.id}/retry"), 409, "RunStateError")
    assert f"cannot retry run '{paused.id}': it is paused" in message
    _error(await client.post(f"/api/runs/{paused.id}/continue",
                             json={"step": "ship", "payload": 1}), 409, "InterruptNotPending")
    message = _error(await client.post(f"/api/runs/{paused.id}/continue",
                                       json={"step": "approve",
                                             "payload": approval(level="huge")}),
                     422, "PayloadValidationError")
    assert "level" in message
    _error(await client.post(f"/api/runs/{paused.id}/continue", content=b"{nope"), 422,
           "BadRequest")
    _error(await client.post(f"/api/runs/{paused.id}/continue", json={"payload": 1}), 422,
           "BadRequest")
    _error(await client.post(f"/api/runs/{paused.id}/continue", json={"step": "approve"}),
           422, "BadRequest")
    _error(await client.post(f"/api/runs/{paused.id}/cancel", json={"reason": 5}), 422,
           "BadRequest")
    _error(await client.get("/api/runs", params={"status": "stuck"}), 400, "BadFilter")
    _error(await client.get("/api/runs", params={"limit": "many"}), 422, "BadRequest")
    _error(await client.get("/api/runs", params={"cursor": "??"}), 422, "ReactorflowError")
    done = await client.post(f"/api/runs/{paused.id}/continue",
                             json={"step": "approve", "payload": approval()})
    assert done.status_code == 200
    _error(await client.post(f"/api/runs/{paused.id}/continue",
                             json={"step": "approve", "payload": approval()}), 409,
           "AlreadyResumed")
    _error(await client.post(f"/api/runs/{paused.id}/cancel"), 409, "RunStateError")


async def test_a_run_of_a_reactor_not_declared_here_reads_but_cannot_be_steered(
        client: httpx.AsyncClient) -> None:
    ghost = rf.Reactor("ops.ghost")

    @ghost.interrupt
    async def wait(payload: int) -> int:
        return payload

    paused = await ghost.run()
    redeploy(ghost)
    assert (await client.get(f"/api/runs/{paused.id}")).json()["status"] == "paused"
    message = _error(await client.post(f"/api/runs/{paused.id}/cancel"), 409, "ReactorNotDeclared")
    assert "'ops.ghost'" in message


async def test_the_token_is_required_for_every_api_request(storage: rf.Storage) -> None:
    paused = await orders.run(item="tea")
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        for method, url in [("GET", "/api/runs"), ("GET", f"/api/runs/{paused.id}"),
                            ("GET", "/api/reactors"), ("GET", f"/api/runs/{paused.id}/events"),
                            ("GET", "/api/events"), ("POST", f"/api/runs/{paused.id}/cancel")]:
            response = await http.request(method, url)
            _error(response, 401, "Unauthorized")
            assert response.headers["www-authenticate"] == "Bearer"
            wrong = await http.request(method, url, headers={"Authorization": "Bearer nope"})
            assert "wrong token" in _error(wrong, 401, "Unauthorized")
        page = await http.get("/")  # the page shell holds no data: it asks for the token
        assert page.status_code == 200 and "password" in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
    assert (await orders.get(paused.id)).status is rf.Status.PAUSED


async def test_without_a_token_reads_are_open_and_changes_always_refused(
        storage: rf.Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTORFLOW_DASHBOARD_TOKEN", raising=False)
    paused = await orders.run(item="tea")
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        assert (await http.get(f"/api/runs/{paused.id}")).status_code == 200
        for action in ("cancel", "undo", "retry"):
            message = _error(await http.post(f"/api/runs/{paused.id}/{action}", headers=AUTH),
                             401, "Unauthorized")
            assert "restart it with --token" in message
        _error(await http.post(f"/api/runs/{paused.id}/continue",
                               json={"step": "approve", "payload": approval()}), 401,
               "Unauthorized")
    assert (await orders.get(paused.id)).status is rf.Status.PAUSED
    monkeypatch.setenv("REACTORFLOW_DASHBOARD_TOKEN", TOKEN)
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        _error(await http.get("/api/runs"), 401, "Unauthorized")
        assert (await http.get("/api/runs", headers=AUTH)).status_code == 200
    with pytest.raises(rf.ConfigurationError, match="non-empty token"):
        create_app(token="")


class Stream:
    """A raw ASGI call whose response body arrives frame by frame."""

    def __init__(self, path: str, query: str = "") -> None:
        self.scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
            "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": query.encode(), "root_path": "",
            "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"host", b"test")],
            "client": ("127.0.0.1", 1), "server": ("test", 80)}
        self.send_body, self.bodies = anyio.create_memory_object_stream[dict[str, Any]](100)
        self.disconnected = anyio.Event()
        self.status = 0

    async def receive(self) -> dict[str, Any]:
        await self.disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            await self.send_body.send(message)

    async def frame(self) -> tuple[str, Any]:
        with anyio.fail_after(20):
            while True:
                message = await self.bodies.receive()
                chunk = message.get("body", b"").decode()
                if chunk.startswith("event: "):
                    head, data = chunk.strip().split("\n", 1)
                    return head[len("event: "):], json.loads(data[len("data: "):])
                if not message.get("more_body", False):
                    return "end", None


async def test_server_sent_events_follow_one_run_live(storage: rf.Storage) -> None:
    app = create_app(token=TOKEN)
    paused = await orders.run(item="tea")
    stream = Stream(f"/api/runs/{paused.id}/events")
    async with anyio.create_task_group() as tg:
        tg.start_soon(app, stream.scope, stream.receive, stream.send)
        kind, first = await stream.frame()
        assert (kind, first["status"]) == ("run", "paused") and stream.status == 200
        await orders.continue_(paused.id, step="approve", payload=approval())
        statuses = []
        while True:
            kind, run = await stream.frame()
            if kind == "end":
                break
            statuses.append(run["status"])
        assert statuses[-1] == "completed"  # and the stream ended with the run
    missing = Stream("/api/runs/nope/events")
    await app(missing.scope, missing.receive, missing.send)
    assert missing.status == 404


async def test_server_sent_events_follow_the_run_list(storage: rf.Storage) -> None:
    app = create_app(token=TOKEN)
    first_run = await orders.run(item="tea")
    stream = Stream("/api/events", "limit=5")
    async with anyio.create_task_group() as tg:
        tg.start_soon(app, stream.scope, stream.receive, stream.send)
        kind, page = await stream.frame()
        assert kind == "runs" and [r["id"] for r in page["runs"]] == [first_run.id]
        second = await orders.run(item="gin", fail=True)
        kind, page = await stream.frame()
        assert [r["id"] for r in page["runs"]] == [second.id, first_run.id]
        stream.disconnected.set()  # the client goes away: the stream stops
    bad = Stream("/api/events", "status=stuck")
    await app(bad.scope, bad.receive, bad.send)
    assert bad.status == 400  # an unknown filter value, as GET /api/runs (api.md §16)
