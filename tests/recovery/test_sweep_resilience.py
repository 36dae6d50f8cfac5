"""The sweeper survives what it cannot read and storage outages: one bad record is reported in
`SweepReport.unreadable` and the other runs are still recovered; the `run_forever` daemon
(`reactorflow sweep`) logs an outage of a real redis-server, backs off, and recovers stalled
runs once the server is back."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator

import anyio
import pytest
import redis.asyncio as aioredis

import reactorflow as rf
from reactorflow import config
from reactorflow.storage.redis.keys import RedisKeys
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.testing.redis_server import redis_server_executable
from tests.helpers import redis_namespace
from tests.recovery.test_corrupt import GARBAGE, VANDAL, _hanging_flow, _stalled_run

SOON = 1e-6  # stall_timeout: a run nobody holds is stalled at once


async def _healthy_stalled(storage: rf.Storage) -> tuple[rf.Reactor, str, list[str]]:
    entered, log = anyio.Event(), []
    flow = _hanging_flow(entered, log)
    return flow, await _stalled_run(storage, flow, entered), log


async def _recovered(flow: rf.Reactor, run_id: str, log: list[str]) -> None:
    run = await flow.get(run_id)
    assert run.status is rf.Status.COMPLETED and run.value == 2
    assert log == ["first", "hangs", "hangs"]


async def test_a_unit_record_that_cannot_be_read_does_not_stop_the_sweep(
        storage: rf.Storage) -> None:
    flow, healthy, log = await _healthy_stalled(storage)
    other = "other-run"  # ended, but one of its async units' marker is garbled
    assert await storage.create_run(other, reactor=flow.name, status="completed", meta=b"m",
                                    state=b"s", created_at=1.0, owner=VANDAL, lock_ttl=5.0)
    await storage.save_step(other, VANDAL, "unit", GARBAGE, unit=True)
    assert await storage.release_lock(other, VANDAL) == 0
    rf.configure(stall_timeout=SOON)

    report = await rf.sweep_once()
    assert report.unreadable == [f"{other}:unit"]
    assert healthy in report.recovered
    await _recovered(flow, healthy, log)


async def test_redis_records_of_the_wrong_type_or_value_are_reported_not_fatal(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    namespace = redis_namespace()
    storage = RedisStorage.from_url(redis_url, namespace=namespace)
    rf.configure(storage=storage)
    keys = RedisKeys(namespace)
    raw = aioredis.Redis.from_url(redis_url)
    try:
        flow, healthy, log = await _healthy_stalled(storage)
        wrong_type, bad_touched, bad_status = "wrong-type", "bad-touched", "bad-status"
        await raw.set(keys.run(wrong_type), b"a string, not a hash")
        await raw.zadd(keys.by_status(flow.name, "running"), {wrong_type: 1.0})
        for run_id in (bad_touched, bad_status):
            assert await storage.create_run(run_id, reactor=flow.name, status="running",
                                            meta=b"m", state=b"s", created_at=2.0,
                                            owner=VANDAL, lock_ttl=5.0)
            assert await storage.release_lock(run_id, VANDAL) == 0
        await raw.hset(keys.run(bad_touched), "touched", "yesterday")
        await raw.hset(keys.run(bad_status), "status", "sleeping")
        rf.configure(stall_timeout=SOON)

        with caplog.at_level(logging.WARNING, logger="reactorflow.sweep"):
            report = await rf.sweep_once()
        assert sorted(report.unreadable) == sorted([wrong_type, bad_touched, bad_status])
        assert report.recovered == [healthy]
        await _recovered(flow, healthy, log)
        logged = " ".join(r.getMessage() for r in caplog.records)
        assert "WRONGTYPE" in logged and "'yesterday' is not a number" in logged
        assert "'sleeping' is not one this version of reactorflow knows" in logged
    finally:
        config.reset()
        await raw.aclose()
        await storage.aclose()


# -- the daemon and a real outage ----------------------------------------------------------------


class Server:
    """A redis-server of this test's own, stopped and started again on the same port."""

    def __init__(self) -> None:
        exe = redis_server_executable()
        assert exe is not None
        self.exe = exe
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.workdir = tempfile.mkdtemp(prefix="rf-outage-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.workdir, "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    async def ready(self) -> None:
        client = aioredis.Redis.from_url(self.url)
        try:
            with anyio.fail_after(10):
                while True:
                    try:
                        await client.ping()
                        return
                    except OSError:
                        await anyio.sleep(0.02)  # polling a starting subprocess's port
                    except Exception:  # redis.ConnectionError while it starts
                        await anyio.sleep(0.02)
        finally:
            await client.aclose()


@pytest.fixture
def server() -> Iterator[Server]:
    found = Server()
    found.start()
    try:
        yield found
    finally:
        found.stop()
        shutil.rmtree(found.workdir, ignore_errors=True)


async def test_sweep_daemon_survives_a_redis_outage_and_recovers_afterwards(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    from reactorflow.runtime.services.sweeper import run_forever

    await server.ready()
    storage = RedisStorage.from_url(server.url, namespace=redis_namespace(),
                                    socket_connect_timeout=0.5, socket_timeout=0.5)
    rf.configure(storage=storage, stall_timeout=SOON)
    reports: list[rf.SweepReport] = []
    swept = anyio.Event()

    def on_report(report: rf.SweepReport) -> None:
        reports.append(report)
        swept.set()

    def logged(name: str) -> bool:
        return any(name in r.getMessage() for r in caplog.records)

    async def until(check: Callable[[], bool], what: str) -> None:
        with anyio.fail_after(30):
            while not check():
                await anyio.sleep(0.02)  # condition polling, not a timing assumption
        assert check(), what

    try:
        with caplog.at_level(logging.INFO, logger="reactorflow.sweep"):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: run_forever(interval=0.05, backoff=0.05, backoff_cap=0.2,
                                                  on_report=on_report))
                with anyio.fail_after(30):
                    await swept.wait()
                server.stop()  # the outage
                await until(lambda: logged("reactorflow.sweep.failed attempt=2"),
                            "two failed sweeps logged")
                server.start()  # back, empty (no persistence)
                await server.ready()
                await until(lambda: logged("reactorflow.sweep.resumed"), "the daemon resumed")
                flow, stalled, log = await _healthy_stalled(storage)
                await until(lambda: any(stalled in r.recovered for r in reports),
                            "the stalled run recovered by the daemon")
                tg.cancel_scope.cancel()
        await _recovered(flow, stalled, log)
        failures = [r for r in caplog.records if "reactorflow.sweep.failed" in r.getMessage()]
        assert failures and all(r.levelno == logging.WARNING for r in failures)
        assert "StorageConnectionError" in failures[0].getMessage()
    finally:
        config.reset()
        await storage.aclose()
