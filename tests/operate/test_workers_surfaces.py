"""The live workers on every surface: `reactorflow workers list` (table and `--json`) in a
subprocess, and `GET /api/workers`, each showing a real heartbeat loop beating into the shared
storage; a worker that stopped is not shown."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from datetime import datetime

import anyio
import httpx
import pytest

import reactorflow as rf
from reactorflow.runtime.services.heartbeats import Heartbeat
from reactorflow.web import create_app
from tests.operate.conftest import Shared, cli
from tests.operate.flows import orders

KEYS = {"process", "host", "queues", "versions", "jobs_in_flight", "started_at", "last_seen"}


@pytest.fixture
def beating(shared: Shared) -> Iterator[Heartbeat]:
    """This process beats into the shared namespace (as a worker process does)."""
    heartbeat = Heartbeat()
    heartbeat.start(["reactorflow", "bulk"])
    try:
        yield heartbeat
    finally:
        heartbeat.stop()


async def _listed() -> None:
    """The first beat is stored (the loop beats at once, in its own thread)."""
    with anyio.fail_after(10):
        while not await rf.list_workers():
            await anyio.sleep(0.02)


async def test_workers_list_json_has_exactly_the_documented_shape(
        shared: Shared, beating: Heartbeat) -> None:
    await _listed()
    result = cli(shared, "workers", "list", "--json")
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert set(body) == {"workers"}
    (worker,) = body["workers"]
    assert set(worker) == KEYS
    assert worker["process"] == os.getpid() and worker["host"] == socket.gethostname()
    assert worker["queues"] == ["bulk", "reactorflow"]
    assert worker["versions"][orders.name] == [1]
    assert worker["jobs_in_flight"] == 0
    started = datetime.fromisoformat(worker["started_at"])
    assert started.tzinfo is not None
    assert started <= datetime.fromisoformat(worker["last_seen"])


async def test_workers_list_prints_a_table_and_says_when_none_is_live(
        shared: Shared, beating: Heartbeat) -> None:
    await _listed()
    result = cli(shared, "workers", "list")
    assert result.code == 0, result.err
    header, row = result.out.splitlines()
    assert header.split() == ["HOST", "PROCESS", "QUEUES", "VERSIONS", "JOBS", "STARTED",
                              "LAST", "SEEN"]
    assert row.startswith(socket.gethostname()) and f" {os.getpid()} " in row
    assert "bulk,reactorflow" in row and f"{orders.name} v1" in row and row.endswith(" s ago")
    beating.stop()  # a clean stop removes the heartbeat at once
    gone = cli(shared, "workers", "list")
    assert gone.code == 0, gone.err
    assert gone.out.startswith("no live workers")
    assert json.loads(cli(shared, "workers", "list", "--json").out) == {"workers": []}


async def test_get_api_workers(storage: rf.Storage) -> None:
    """On both backends (`storage`: memory, Redis)."""
    heartbeat = Heartbeat()
    heartbeat.start(["reactorflow"])
    try:
        await _listed()
        await _api_lists_this_process()
    finally:
        heartbeat.stop()
    assert await rf.list_workers() == []


async def _api_lists_this_process() -> None:
    transport = httpx.ASGITransport(app=create_app(token="t0k"))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        assert (await http.get("/api/workers")).status_code == 401  # a read needs the token
        response = await http.get("/api/workers", headers={"Authorization": "Bearer t0k"})
    assert response.status_code == 200, response.text
    (worker,) = response.json()["workers"]
    assert set(worker) == KEYS and worker["process"] == os.getpid()
