"""The HTTP API when the storage fails (issue 22, item 10): 503 with the error's message, as
JSON like every other error; never 422, which says the client's request was wrong. The app runs
against a redis-server of its own that really fails: full (maxmemory reached), then stopped."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import redis

import reactorflow as rf
from reactorflow.storage.redis import RedisStorage
from reactorflow.testing.redis_server import (
    free_port,
    redis_server_executable,
    start_redis,
    stop_servers,
)
from reactorflow.web import create_app
from reactorflow.web.responses import error_response
from tests.helpers import configured, redis_namespace
from tests.operate.flows import orders

TOKEN = "s3cret-token"


@pytest.fixture
def own_redis() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    exe = redis_server_executable()
    if exe is None:
        pytest.skip("no redis-server")
    workdir = tempfile.mkdtemp(prefix="rf-web-")
    port = free_port()
    proc = start_redis(exe, port, workdir)
    try:
        yield f"redis://127.0.0.1:{port}/0", proc
    finally:
        stop_servers([proc], workdir)


@pytest.fixture
async def client(own_redis: tuple[str, subprocess.Popen[bytes]]
                 ) -> AsyncIterator[httpx.AsyncClient]:
    storage = RedisStorage.from_url(own_redis[0], namespace=redis_namespace(),
                                    socket_connect_timeout=0.5)
    async with configured(storage):
        transport = httpx.ASGITransport(app=create_app(token=TOKEN))
        async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            yield http
        await storage.aclose()


def _failure(response: httpx.Response, kind: str) -> str:
    assert response.status_code == 503, response.text
    body = response.json()
    assert set(body) == {"error", "message"} and body["error"] == kind
    return str(body["message"])


async def test_a_storage_that_refuses_writes_answers_503_with_its_message(
        own_redis: tuple[str, subprocess.Popen[bytes]], client: httpx.AsyncClient) -> None:
    paused = await orders.run(item="tea")
    with redis.Redis.from_url(own_redis[0]) as admin:
        admin.config_set("maxmemory", 1)  # every write refused: OOM
        try:
            message = _failure(await client.post(f"/api/runs/{paused.id}/cancel",
                                                 json={"reason": "full"}), "StorageReplyError")
        finally:
            admin.config_set("maxmemory", 0)
    assert "OOM" in message and "maxmemory" in message
    still = (await client.get(f"/api/runs/{paused.id}")).json()
    assert still["status"] == "paused"  # nothing was written


async def test_a_storage_stopped_mid_test_answers_503_with_its_message(
        own_redis: tuple[str, subprocess.Popen[bytes]], client: httpx.AsyncClient) -> None:
    paused = await orders.run(item="tea")
    assert (await client.get(f"/api/runs/{paused.id}")).status_code == 200
    own_redis[1].terminate()
    own_redis[1].wait(10)
    for response in (await client.get(f"/api/runs/{paused.id}"),
                     await client.get("/api/runs"),
                     await client.post(f"/api/runs/{paused.id}/cancel", json={"reason": "x"})):
        message = _failure(response, "StorageConnectionError")
        assert own_redis[0].removesuffix("/0") in message


def test_every_storage_error_maps_to_503_but_a_lost_lock() -> None:
    """The table itself: any `rf.StorageError` (a subclass added later included) is the
    server's failure, 503; only `LockLost` (another execution holds the run) is a conflict."""
    assert error_response(rf.StorageError("disk on fire")).status_code == 503
    assert error_response(rf.StorageReplyError("redis://h:1", "ERR x", "save_step")
                          ).status_code == 503
    assert error_response(rf.StoragePoolExhausted("redis://h:1", 4, 1.0)).status_code == 503
    assert error_response(rf.LockLost("r1", "o1")).status_code == 409
