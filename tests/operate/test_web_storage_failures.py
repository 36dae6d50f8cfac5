"""The HTTP API when the storage fails (issue 22, item 10): 503 with the error's message when
the failure may pass (unreachable, not ready, full), 500 with its message when it stays until
someone acts (a permission refused, a corrupt record), as JSON like every other error; never
422, which says the client's request was wrong. The app runs against a redis-server of its own
that really fails: full (maxmemory reached), refusing its user, holding a corrupt record, then
stopped."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import redis

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
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


def _failure(response: httpx.Response, kind: str, status: int = 503) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert {"error", "message"} <= set(body) <= {"error", "message", "fields"}  # nothing else
    assert body["error"] == kind
    assert all(isinstance(v, str | int | float) for v in body.get("fields", {}).values())
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


async def test_a_corrupt_record_answers_500_naming_the_run(
        own_redis: tuple[str, subprocess.Popen[bytes]], client: httpx.AsyncClient) -> None:
    # not transient: asking again fails the same way (it answered 503, "try again")
    paused = await orders.run(item="tea")
    storage = rf.config.current_storage()
    assert isinstance(storage, RedisStorage)
    with redis.Redis.from_url(own_redis[0]) as admin:
        admin.hset(storage._keys.run(paused.id), "state", b"\xff not msgpack")
    message = _failure(await client.get(f"/api/runs/{paused.id}"), "CorruptRecord", 500)
    assert paused.id in message and "state" in message


async def test_a_permission_refused_answers_500_with_the_reply(
        own_redis: tuple[str, subprocess.Popen[bytes]]) -> None:
    namespace = redis_namespace()
    async with configured(RedisStorage.from_url(own_redis[0], namespace=namespace)):
        paused = await orders.run(item="tea")
    scheme, _, rest = own_redis[0].partition("://")
    with redis.Redis.from_url(own_redis[0]) as admin:  # a user that may touch no key
        admin.acl_setuser("nokeys", enabled=True, passwords=["+pw"], commands=["+@all"])
    async with configured(RedisStorage.from_url(f"{scheme}://nokeys:pw@{rest}",
                                                namespace=namespace)):
        transport = httpx.ASGITransport(app=create_app(token=TOKEN))
        async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            message = _failure(await http.get(f"/api/runs/{paused.id}"),
                               "StorageReplyError", 500)
    assert "NOPERM" in message and "ACL" in message


def test_storage_errors_map_by_their_transient_flag_and_a_lost_lock_is_a_conflict() -> None:
    """The table itself: a `rf.StorageError` (a subclass added later included) is the server's
    failure: 503 when it may pass (`transient`, the default), 500 when someone must act; only
    `LockLost` (another execution holds the run) is a conflict."""
    url = "redis://h:1"
    assert error_response(rf.StorageError("disk on fire")).status_code == 503
    assert error_response(rf.StorageConnectionError(url, "refused")).status_code == 503
    assert error_response(rf.StorageNotReady(url, "LOADING ...", "save_step")).status_code == 503
    assert error_response(rf.StoragePoolExhausted(url, 4, 1.0)).status_code == 503
    for reply in ("OOM command not allowed", "READONLY You can't write against a replica"):
        assert error_response(rf.StorageReplyError(url, reply, "save_step")).status_code == 503
    for reply in ("NOPERM no permissions", "WRONGTYPE Operation against a key", "MOVED 1 h:2",
                  "ERR x"):
        response = error_response(rf.StorageReplyError(url, reply, "save_step"))
        assert response.status_code == 500 and reply.encode() in bytes(response.body)
    response = error_response(rf.CorruptRecord("r1", "its touched time is not a number"))
    assert response.status_code == 500 and b"'r1'" in bytes(response.body)
    assert error_response(rf.LockLost("r1", "o1")).status_code == 409

    class Declared(rf.StorageError):
        transient = False

    assert error_response(Declared("stays")).status_code == 500
