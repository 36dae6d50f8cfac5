"""Redis that does not answer: every call ends, with `rf.StorageConnectionError`, after the
connect and socket timeouts (default on, configurable) — never blocks forever. Pub/sub waits
are not cut short by the socket timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.storage.redis import connections as redis_conn
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import redis_namespace, unique

SHORT = 0.3  # seconds: a timeout short enough for a test


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """A TCP server that accepts connections and reads requests but never answers."""
    held: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        while await reader.read(65536):
            pass

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        for writer in held:
            writer.close()
        server.close()


def _flow() -> rf.Reactor:
    flow = rf.Reactor(unique("silent"))

    @flow.step
    async def only() -> int:
        return 1

    return flow


async def test_default_socket_timeout_ends_calls_to_a_server_that_never_answers(
        silent_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_conn, "SOCKET_TIMEOUT", SHORT, raising=False)  # the default, shorter
    storage = RedisStorage.from_url(silent_server, namespace=redis_namespace())
    rf.configure(storage=storage)
    flow = _flow()
    try:
        for call in (flow.run, lambda: flow.get("some-run"), rf.sweep_once):
            with anyio.fail_after(30):  # (the old code blocked here forever)
                with pytest.raises(rf.StorageConnectionError) as caught:
                    await call()
            assert caught.value.url == silent_server
            assert "Timeout" in caught.value.reason
    finally:
        config.reset()
        await storage.aclose()


async def test_socket_timeout_is_configurable_on_the_storage(silent_server: str) -> None:
    storage = RedisStorage.from_url(silent_server, namespace=redis_namespace(),
                                    socket_timeout=SHORT)
    try:
        with anyio.fail_after(30), pytest.raises(rf.StorageConnectionError):
            await storage.load_head("some-run")
    finally:
        await storage.aclose()


async def test_default_timeouts_are_set_and_documented() -> None:
    storage = RedisStorage.from_url("redis://127.0.0.1:1/0", namespace=redis_namespace())
    options = storage._redis._options
    assert options["socket_timeout"] == redis_conn.SOCKET_TIMEOUT == 5.0
    assert options["socket_connect_timeout"] == redis_conn.CONNECT_TIMEOUT == 5.0
    assert "socket_timeout" in (RedisStorage.from_url.__doc__ or "")


async def test_tls_url_against_a_plain_redis_fails_instead_of_hanging(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_conn, "CONNECT_TIMEOUT", SHORT)
    monkeypatch.setattr(redis_conn, "SOCKET_TIMEOUT", SHORT, raising=False)
    storage = RedisStorage.from_url(redis_url.replace("redis://", "rediss://"),
                                    namespace=redis_namespace())
    try:
        with anyio.fail_after(30), pytest.raises(rf.StorageConnectionError) as caught:
            await storage.load_head("some-run")
        assert caught.value.url.startswith("rediss://")
    finally:
        await storage.aclose()


async def test_subscription_waits_longer_than_the_socket_timeout(redis_url: str) -> None:
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace(),
                                    socket_timeout=SHORT)
    try:
        async with storage.subscribe("run-1") as subscription:
            assert await subscription.wait(3 * SHORT) is False  # quiet, not an error
            await storage.publish("run-1")
            assert await subscription.wait(10) is True
    finally:
        await storage.aclose()
