"""`run.version` in the HTTP API (api.md §14), on both backends: the runs list and a run carry
their version (1 for a run whose meta has no version field); the reactors say which versions
the process declares, each version's graph can be fetched; a run is read with the graph of its
own version, and a run of a version no module declares from the graph stored with it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest

import reactorflow as rf
from reactorflow.web import create_app
from tests.helpers import redeploy, unique
from tests.versions.flows import V1_STEPS, V2_STEPS, Order, migrated_run, version_1, version_2

TOKEN = "v-token"


@pytest.fixture
async def client(storage: rf.Storage) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        yield http


def _error(response: httpx.Response, code: int, kind: str) -> str:
    assert response.status_code == code, response.text
    body = response.json()
    assert {"error", "message"} <= set(body) <= {"error", "message", "fields"}
    assert body["error"] == kind
    return str(body["message"])


async def test_the_runs_list_and_a_run_carry_their_version(
        client: httpx.AsyncClient, storage: rf.Storage) -> None:
    name = unique("web.ver")
    deployed = await migrated_run(name)
    head = await storage.load_head(deployed.v1_run)
    assert head is not None  # a version 1 run's meta has no version field (as before versions)
    assert "version" not in msgspec.msgpack.decode(head.meta)
    page = (await client.get("/api/runs", params={"reactor": name})).json()
    assert {r["id"]: r["version"] for r in page["runs"]} == {
        deployed.v1_run: 1, deployed.migrated: 2, deployed.v2_run: 2}
    for run_id, version in ((deployed.v1_run, 1), (deployed.migrated, 2)):
        run = (await client.get(f"/api/runs/{run_id}")).json()
        assert run["version"] == version
    migrated = (await client.get(f"/api/runs/{deployed.migrated}")).json()
    events = [e for e in migrated["history"] if e["kind"] == "run.migrated"]
    assert [e["detail"] for e in events] == ["1 -> 2: completed fraud_check"]


async def test_the_reactors_say_their_versions_and_give_each_versions_graph(
        client: httpx.AsyncClient) -> None:
    name = unique("web.ver")
    v1, v2 = version_1(name), version_2(name, migration=False)
    listed = {r["name"]: r for r in (await client.get("/api/reactors")).json()["reactors"]}
    mine = listed[name]
    assert mine["version"] == 2 and mine["versions"] == [1, 2]
    assert [s["key"] for s in mine["steps"]] == V2_STEPS  # the newest: it starts runs
    newest = (await client.get(f"/api/reactors/{name}")).json()
    assert newest == mine
    first = (await client.get(f"/api/reactors/{name}", params={"version": "1"})).json()
    assert first["version"] == 1 and first["versions"] == [1, 2]
    assert [(s["key"], s["deps"]) for s in first["steps"]] == [
        ("reserve", []), ("approve", ["reserve"]), ("bill", ["approve"])]
    assert set(first["interrupts"]) == {"approve"}
    assert first["mermaid"] == v1.to_mermaid() != v2.to_mermaid()
    message = _error(await client.get(f"/api/reactors/{name}", params={"version": "3"}), 404,
                     "NoSuchReactor")
    assert "no version 3" in message and "version(s) 1, 2" in message
    message = _error(await client.get("/api/reactors/web.nobody"), 404, "NoSuchReactor")
    assert "'web.nobody'" in message and "import the module" in message
    for bad in ("0", "-1", "two", "1.5"):
        message = _error(await client.get(f"/api/reactors/{name}", params={"version": bad}),
                         422, "BadRequest")
        assert f"version={bad!r}" in message and "whole number >= 1" in message


async def test_a_run_is_read_with_the_graph_of_its_own_version(
        client: httpx.AsyncClient) -> None:
    """A version 1 run, shown by a process that declares versions 1 and 2, shows version 1's
    steps (not version 2's new ones, pending)."""
    name = unique("web.ver")
    v1 = version_1(name)
    old = await v1.run(Order("tea"))
    v2 = version_2(name, migration=False)
    fresh = await v2.run(Order("gin"))
    run = (await client.get(f"/api/runs/{old.id}")).json()
    assert run["version"] == 1 and list(run["steps"]) == V1_STEPS
    assert run["inputs"] == {"item": "tea"}
    newer = (await client.get(f"/api/runs/{fresh.id}")).json()
    assert newer["version"] == 2 and list(newer["steps"]) == V2_STEPS
    assert (await rf.get_run(old.id)).steps.keys() == (await v1.get(old.id)).steps.keys()


async def test_a_run_of_a_version_no_module_declares_shows_from_its_stored_graph(
        client: httpx.AsyncClient) -> None:
    name = unique("web.ver")
    v1 = version_1(name)
    old = await v1.run(Order("tea"))
    redeploy(v1)  # only version 2 is declared now, with no migration from 1
    v2 = version_2(name, migration=False)
    run = (await client.get(f"/api/runs/{old.id}")).json()
    assert run["version"] == 1 and run["status"] == "paused"
    assert list(run["steps"]) == V1_STEPS  # the graph stored with the run, in its order
    assert run["steps"]["reserve"]["status"] == "completed"
    assert run["steps"]["bill"]["status"] == "pending"
    assert run["inputs"] == {"item": "tea"}
    listed = {r["name"]: r for r in (await client.get("/api/reactors")).json()["reactors"]}
    assert listed[v2.name]["versions"] == [2]
    _error(await client.get(f"/api/reactors/{name}", params={"version": "1"}), 404,
           "NoSuchReactor")
