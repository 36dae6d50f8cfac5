"""Storage selection from the environment, and an unreachable Redis."""

from __future__ import annotations

import json
import socket
import traceback
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis.asyncio as aioredis

import reactorflow as rf
from reactorflow import config
from tests.helpers import unique
from tests.recovery.conftest import Child, child_env
from tests.workflows.durable import env_flow

DEDICATED_DB = 5


@pytest.fixture
async def db5_url(redis_url: str) -> AsyncIterator[str]:
    """The suite's Redis on another database, in the default namespace ("rf"). The test's own
    reactor's runs are deleted before and after, and nothing else (the Redis may be shared)."""
    url = urlunsplit(urlsplit(redis_url)._replace(path=f"/{DEDICATED_DB}"))
    client = aioredis.Redis.from_url(url)
    try:
        await _forget_reactor(client, "rf", env_flow.name)
        yield url
    finally:
        await _forget_reactor(client, "rf", env_flow.name)
        await client.aclose()


async def _forget_reactor(client: aioredis.Redis, ns: str, reactor: str) -> None:
    """Delete every run of `reactor` in namespace `ns` (its keys and index entries)."""
    indexes = [key async for key in client.scan_iter(match=f"{ns}:idx:*:{reactor}")]
    run_ids = {member.decode() for key in indexes for member in await client.zrange(key, 0, -1)}
    for run_id in run_ids:
        keys = [key async for key in client.scan_iter(match=f"{ns}:*{{{run_id}}}*")]
        if keys:
            await client.delete(*keys)
    if indexes:
        await client.delete(*indexes)
    await client.srem(f"{ns}:reactors", reactor)


@pytest.mark.slow
async def test_redis_url_from_the_environment_selects_redis(
        db5_url: str, redis_url: str, spawn: Callable[..., Child]) -> None:
    child = spawn("env", "env", env=child_env(**{config.REDIS_URL_ENV: db5_url}))
    out = (await child.finish()).splitlines()
    started = json.loads(out[0])
    assert started["status"] == "completed"
    assert started["value"] == f"ran in {child.proc.pid}"
    host = urlsplit(db5_url).netloc
    assert out[1] == f"RedisStorage at redis://{host}/{DEDICATED_DB} (namespace 'rf')"

    readback = rf.RedisStorage.from_url(db5_url)  # the default namespace, "rf"
    rf.configure(storage=readback)
    try:
        head = await readback.load_head(started["id"])
        assert head is not None
        assert head.reactor == env_flow.name and head.status == "completed"
        run = await env_flow.get(started["id"])
        assert run.status is rf.Status.COMPLETED and run.value == started["value"]
        assert [r.id for r in (await env_flow.list_runs()).runs] == [started["id"]]
    finally:
        config.reset()
        await readback.aclose()

    # Stored in that database, nowhere else.
    for url, expected in ((db5_url, 1), (redis_url, 0)):
        client = aioredis.Redis.from_url(url)
        try:
            assert await client.exists(f"rf:run:{{{started['id']}}}") == expected, url
        finally:
            await client.aclose()


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when this returns: nobody listens


async def test_unreachable_redis_raises_a_connection_error_without_credentials() -> None:
    port = _closed_port()
    storage = rf.RedisStorage.from_url(f"redis://user:secret@127.0.0.1:{port}/0")
    rf.configure(storage=storage)
    flow = rf.Reactor(unique("unreachable"))
    ran: list[str] = []

    @flow.step
    async def only() -> int:
        ran.append("only")
        return 1

    try:
        with pytest.raises(rf.StorageConnectionError) as info:
            await flow.run()
        error = info.value
        message = str(error)
        assert f"redis://127.0.0.1:{port}/0" in message
        assert error.url == f"redis://127.0.0.1:{port}/0"
        assert "secret" not in message and "user:" not in message and "user@" not in message
        assert "secret" not in repr(error)
        rendered = "".join(traceback.format_exception(error))
        assert "secret" not in rendered  # nor in the chained Redis error
        assert ran == []
        assert "secret" not in storage.describe()
    finally:
        config.reset()
        await storage.aclose()
