"""Shared fixtures: a real redis-server started by the suite, and a storage parameter that runs
each test on both backends."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

import reactorflow as rf
from reactorflow import config

REDIS_ENV = "REACTORFLOW_TEST_REDIS_URL"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A redis-server of the suite's own on a free loopback port (or REACTORFLOW_TEST_REDIS_URL)."""
    configured = os.environ.get(REDIS_ENV)
    if configured:
        yield configured
        return
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is not on PATH: install it (apt-get install redis-server) or "
                    f"set {REDIS_ENV} to a Redis the tests may use")
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="rf-redis-")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--daemonize", "no", "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while not _ping(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"redis-server did not start on port {port}")
        time.sleep(0.02)
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
    return RedisStorage.from_url(url, namespace=f"t{uuid.uuid4().hex[:10]}")


@pytest.fixture(params=["memory", "redis"])
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    """The configured storage for one test, on each backend in turn."""
    backend = make_storage(request.param, request)
    rf.configure(storage=backend)
    try:
        yield backend
    finally:
        config.reset()
        await backend.aclose()


@pytest.fixture
async def memory() -> AsyncIterator[rf.Storage]:
    """MemoryStorage only: for definition-level tests where the backend does not matter."""
    backend = rf.MemoryStorage()
    rf.configure(storage=backend)
    try:
        yield backend
    finally:
        config.reset()
