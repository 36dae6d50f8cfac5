"""`reactorflow worker` and an unreachable broker, a Redis or a RabbitMQ (issue 22, item 13),
with real subprocesses.

At start it fails like every other command: one line naming host and port, exit status 1 (it
printed its banner and then logged CRITICAL every 3 s forever). During a later outage it keeps
going, backing off, with one log line when the broker is lost and one when it is back."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.testing.redis_server import (
    free_port,
    ping_redis,
    redis_server_executable,
    start_redis,
    stop_servers,
)
from tests.helpers import redis_namespace
from tests.workers.test_real_workers import ROOT, Shared, Workers
from tests.workflows import background as bg

pytestmark = pytest.mark.slow
LOST = "reactorflow.worker.broker_lost"
RESTORED = "reactorflow.worker.broker_restored"
DRAMATIQ_EVERY_3S = ("Consumer encountered a connection error", "Restarting consumer")


def test_a_worker_whose_redis_cannot_be_reached_fails_at_start_in_one_line() -> None:
    port = free_port()  # nothing listens there
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
           "REACTORFLOW_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    proc = subprocess.run([sys.executable, "-m", "reactorflow", "worker",
                           "tests.workflows.background"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines == [lines[0], "(run again with -v for the traceback)"], proc.stderr
    assert lines[0].startswith("error: cannot reach")
    assert f"127.0.0.1:{port}" in lines[0]
    assert "reactorflow worker: broker" not in proc.stderr  # no banner: it never started


def test_a_worker_whose_rabbitmq_cannot_be_reached_fails_at_start_in_one_line(
        redis_url: str) -> None:
    pytest.importorskip("pika", reason="the rabbitmq extra: pip install 'reactorflow[rabbitmq]'")
    port = free_port()  # nothing listens there
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "REACTORFLOW_REDIS_URL": redis_url,
           bg.NAMESPACE_ENV: redis_namespace("amqp-start"),
           bg.AMQP_ENV: f"amqp://guest:secret-pw@127.0.0.1:{port}/%2F"}
    proc = subprocess.run([sys.executable, "-m", "reactorflow", "worker",
                           "tests.workflows.background"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines == [lines[0], "(run again with -v for the traceback)"], proc.stderr
    assert lines[0].startswith("error: cannot reach")
    assert f"127.0.0.1:{port}" in lines[0] and "RabbitmqBroker" in lines[0]
    assert "secret-pw" not in proc.stderr
    assert "reactorflow worker: broker" not in proc.stderr  # no banner: it never started


class Server:
    """A redis-server of the test's own on a fixed port, stopped and started again."""

    def __init__(self, exe: str) -> None:
        self.exe = exe
        self.port = free_port()
        self.workdir = tempfile.mkdtemp(prefix="rf-outage-")
        self.procs = [start_redis(exe, self.port, self.workdir)]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.procs[-1].terminate()
        self.procs[-1].wait(10)

    def start(self) -> None:
        self.procs.append(start_redis(self.exe, self.port, self.workdir))


@pytest.fixture
def server() -> Iterator[Server]:
    exe = redis_server_executable()
    if exe is None:
        pytest.skip("no redis-server")
    found = Server(exe)
    try:
        yield found
    finally:
        stop_servers(found.procs, found.workdir)


@pytest.fixture
async def lane(server: Server, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Shared]:
    shared = Shared(server.url, redis_namespace("outage"), tmp_path / "notes.log")
    monkeypatch.setenv(bg.LOG_ENV, str(shared.log))
    storage, broker = bg.namespaced(shared.url, shared.namespace)
    rf.configure(storage=storage, broker=broker)
    try:
        yield shared
    finally:
        config.reset()
        await storage.aclose()


def worker_log(lane: Shared) -> str:
    return lane.log.with_suffix(".stderr").read_text()


def until_logged(lane: Shared, text: str) -> None:
    deadline = time.monotonic() + 60
    while text not in worker_log(lane):
        assert time.monotonic() < deadline, f"{text!r} never logged:\n{worker_log(lane)}"
        time.sleep(0.05)  # (another process's log: nothing to await)


async def _round_trip() -> None:
    run = await bg.dispatched.dispatch()
    done = await bg.dispatched.wait(run.id, timeout=60)
    assert done.value == 42


async def test_a_worker_rides_out_an_outage_with_one_line_when_lost_and_one_when_back(
        server: Server, lane: Shared, tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    workers = Workers(lane, gates, threads=2)
    try:
        await _round_trip()  # the worker is up and consuming
        server.stop()
        until_logged(lane, LOST)
        # while it is down the worker keeps trying (backing off) and logs nothing more
        server.start()
        assert ping_redis(server.port)
        await _round_trip()  # the worker consumes again: it ran the new run
        until_logged(lane, RESTORED)
        assert workers.proc.poll() is None  # it kept going throughout
    finally:
        workers.stop()
    log = worker_log(lane)
    assert log.count(LOST) == 1 and log.count(RESTORED) == 1, log
    assert f"127.0.0.1:{server.port}" in log.split(LOST, 1)[1].splitlines()[0]
    assert not any(noise in log for noise in DRAMATIQ_EVERY_3S), log


async def test_a_dispatch_whose_broker_cannot_be_reached_names_the_run_and_loses_nothing(
        redis_url: str) -> None:
    """Storage is up, the broker is not: `dispatch` stores the run, then fails to send its job
    with an `rf.BrokerError` naming the run (not the broker client's own exception); the run
    is in storage, as the error says."""
    from dramatiq.brokers.redis import RedisBroker

    from tests.helpers import closed_port

    storage = rf.RedisStorage(redis_url, namespace=redis_namespace("broker-down"))
    broker = RedisBroker(url=f"redis://127.0.0.1:{closed_port()}/0")
    rf.configure(storage=storage, broker=broker)
    try:
        with pytest.raises(rf.BrokerError) as caught:
            await bg.handoff.dispatch()
        error = caught.value
        assert error.run_id is not None and error.job == "reactorflow.execute_run"
        assert f"run {error.run_id!r}" in str(error) and "do not start the run again" in str(error)
        assert "ConnectionError" in error.reason
        stored = await storage.load_head(error.run_id)
        assert stored is not None and stored.reactor == bg.handoff.name
    finally:
        config.reset()
        await storage.aclose()
