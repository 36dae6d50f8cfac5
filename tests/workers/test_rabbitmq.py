"""The RabbitMQ lane: `reactorflow worker` subprocesses fed by Dramatiq's `RabbitmqBroker`, on
a `rabbitmq-server` the suite starts itself (once per session: it boots slowly), for every
background path: dispatch, hand-off, async units, parking, a fanned-out map, delayed messages
(snoozes) and a resume in the background. Storage is the suite's Redis.

The server runs as a node of its own (its own node name, AMQP, distribution and epmd ports, and
its data, logs and Erlang cookie in a temporary directory), so it never meets another RabbitMQ
on the machine. Skipped, saying what to install, where `rabbitmq-server` is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from dramatiq.brokers.stub import StubBroker

import reactorflow as rf
from reactorflow import config
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.testing.redis_server import free_port
from tests.helpers import redis_namespace
from tests.workers.test_real_workers import Shared, Workers
from tests.workers.test_worker_broker_outage import (
    DRAMATIQ_EVERY_3S,
    LOST,
    RESTORED,
    until_logged,
    worker_log,
)
from tests.workflows import background as bg
from tests.workflows import parking as pk

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # Debian's; /usr/sbin's wrapper su's to rabbitmq
pytestmark = [
    pytest.mark.slow,
    pytest.mark.rabbitmq,
    pytest.mark.skipif(not os.access(SERVER, os.X_OK) and shutil.which("rabbitmq-server") is None,
                       reason="rabbitmq-server is not installed: apt-get install rabbitmq-server"),
]
BOOT_TIMEOUT = 120.0


def _server() -> str:
    return SERVER if os.access(SERVER, os.X_OK) else str(shutil.which("rabbitmq-server"))


def _answers(url: str) -> bool:
    import pika

    try:
        pika.BlockingConnection(pika.URLParameters(url)).close()
    except Exception:  # not up yet (refused, reset, handshake cut short)
        return False
    return True


class RabbitNode:
    """A rabbitmq-server of the suite's own on free loopback ports (its own epmd too), its
    data, logs and cookie in a temporary directory; stopped and started again on the same
    ports and data (`stop`, `start`)."""

    def __init__(self) -> None:
        self.home = tempfile.mkdtemp(prefix="rf-rabbitmq-")
        (Path(self.home) / "enabled_plugins").write_text("[].\n")
        self.port, dist, self.epmd = free_port(), free_port(), free_port()
        home = self.home
        self.env = dict(
            os.environ, HOME=home, RABBITMQ_NODENAME=f"rftest{uuid.uuid4().hex[:8]}@localhost",
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(dist), ERL_EPMD_PORT=str(self.epmd),
            RABBITMQ_MNESIA_BASE=f"{home}/mnesia", RABBITMQ_LOG_BASE=f"{home}/log",
            RABBITMQ_ENABLED_PLUGINS_FILE=f"{home}/enabled_plugins",
            RABBITMQ_CONF_ENV_FILE=f"{home}/env.conf", RABBITMQ_CONFIG_FILE=f"{home}/rabbitmq",
            RABBITMQ_ADVANCED_CONFIG_FILE=f"{home}/advanced.config",
            RABBITMQ_PID_FILE=f"{home}/pid")
        self.env.pop("RABBITMQ_ALLOW_INPUT", None)
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the node and wait until it answers AMQP."""
        with Path(self.home, "server.log").open("ab") as log:
            self.proc = proc = subprocess.Popen(
                [_server()], cwd=self.home, env=self.env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + BOOT_TIMEOUT
        while not _answers(self.url):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"rabbitmq-server did not start on port {self.port}: "
                            f"{Path(self.home, 'server.log').read_text(errors='replace')[-500:]}")
            time.sleep(0.2)  # polling a subprocess's port: nothing to wait on

    def stop(self) -> None:
        """Stop the node (its epmd stays: a restart registers again)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def remove(self) -> None:
        self.stop()
        subprocess.run(["epmd", "-kill"], env=dict(os.environ, ERL_EPMD_PORT=str(self.epmd)),
                       capture_output=True, check=False, timeout=10)
        shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture(scope="session")
def rabbit_node() -> Iterator[RabbitNode]:
    """The suite's RabbitMQ node (it boots slowly: once per session)."""
    node = RabbitNode()
    try:
        node.start()
        yield node
    finally:
        node.remove()


@pytest.fixture(scope="session")
def amqp_url(rabbit_node: RabbitNode) -> str:
    return rabbit_node.url


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    path = tmp_path / "gates"
    path.mkdir()
    return path


@pytest.fixture
async def shared(redis_url: str, amqp_url: str, tmp_path: Path, gates: Path,
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Shared]:
    """Storage in a Redis namespace of this test's own; jobs through the RabbitMQ server (its
    queues purged after the test)."""
    lane = Shared(redis_url, redis_namespace("rabbit"), tmp_path / "notes.log")
    monkeypatch.setenv(bg.LOG_ENV, str(lane.log))
    monkeypatch.setenv(bg.GATE_ENV, str(gates))
    monkeypatch.setenv(bg.AMQP_ENV, amqp_url)
    storage, broker = bg.namespaced(lane.url, lane.namespace)
    rf.configure(storage=storage, broker=broker, lock_ttl=2.0, stall_timeout=0.5)
    try:
        yield lane
    finally:
        config.reset()
        await storage.aclose()
        broker.flush_all()  # type: ignore[attr-defined]
        broker.close()  # type: ignore[attr-defined]


@pytest.fixture
def workers(shared: Shared, gates: Path) -> Iterator[Workers]:
    started = Workers(shared, gates, module="tests.workflows.parking", threads=2,
                      env={bg.AMQP_ENV: os.environ[bg.AMQP_ENV]})
    yield started
    started.stop()


async def test_every_background_path_runs_through_rabbitmq(shared: Shared,
                                                           workers: Workers) -> None:
    """One worker process for all paths (a RabbitMQ lane must stay lean)."""
    log = shared.log
    me = os.getpid()
    # dispatch: the whole run in the worker
    run = await bg.dispatched.dispatch()
    assert (await bg.dispatched.wait(run.id, timeout=60)).value == 42
    assert me not in bg.pids(log, "only")
    # hand-off: the first step here, the rest in the worker
    run = await bg.handoff.run()
    done = await bg.handoff.wait(run.id, timeout=30)
    assert done.value == "h1h2h3" and me not in bg.pids(log, "h2") | bg.pids(log, "h3")
    # async unit: dispatched to the worker, the reader here waits for it
    run = await bg.units.run(order_id="R1")
    assert run.status is rf.Status.COMPLETED
    assert me not in bg.pids(log, "send_email attempt 1")
    # resume in the background
    paused = await bg.late.run()
    await bg.late.continue_(paused.id, step="approve", payload={"ok": True})
    assert (await bg.late.wait(paused.id, timeout=30)).value == "approved=True"
    # parking: runs wait for their units in the worker without holding its two threads
    started = [await pk.waits.dispatch(n=n) for n in range(6)]
    finished = [await pk.waits.wait(r.id, timeout=60) for r in started]
    assert [r.value for r in finished] == [n * 10 + 1 for n in range(6)]
    # a map fanned out over the worker: one job per element, the run resumed once
    run = await pk.fleet.run(items=list(range(10)))
    assert run.status is rf.Status.RUNNING  # parked at the map
    done = await pk.fleet.wait(run.id, timeout=60)
    assert done.value == sum(i * i for i in range(10))
    squared_in = bg.pids(log, "square 9")
    assert squared_in and me not in squared_in


async def test_a_delayed_message_is_delivered_after_its_delay(shared: Shared,
                                                              workers: Workers) -> None:
    """Snoozes and re-checks are delayed messages (RabbitMQ: Dramatiq's delay queue)."""
    broker = config.settings().broker
    rf.configure(broker=StubBroker())  # a run stored, its job sent nowhere
    run = await bg.dispatched.dispatch()
    rf.configure(broker=broker)
    assert (await bg.dispatched.get(run.id)).status is rf.Status.RUNNING
    queue.enqueue_run(run.id, bg.dispatched.name, delay=1.0, version=1)
    done = await bg.dispatched.wait(run.id, timeout=60)
    assert done.value == 42
    with anyio.fail_after(5):
        while not bg.pids(shared.log, "only"):
            await anyio.sleep(0.05)
    assert os.getpid() not in bg.pids(shared.log, "only")


async def test_a_worker_rides_out_a_rabbitmq_restart_with_one_line_when_lost_and_one_when_back(
        rabbit_node: RabbitNode, shared: Shared, workers: Workers) -> None:
    # (issue 22, item 13) the node is stopped and started again on the same ports and data
    run = await bg.dispatched.dispatch()
    assert (await bg.dispatched.wait(run.id, timeout=60)).value == 42  # up and consuming
    rabbit_node.stop()
    until_logged(shared, LOST)
    rabbit_node.start()
    run = await bg.dispatched.dispatch()
    assert (await bg.dispatched.wait(run.id, timeout=60)).value == 42  # consuming again
    until_logged(shared, RESTORED)
    assert workers.proc.poll() is None  # it kept going throughout
    log = worker_log(shared)
    assert log.count(LOST) == 1 and log.count(RESTORED) == 1, log
    assert f"127.0.0.1:{rabbit_node.port}" in log.split(LOST, 1)[1].splitlines()[0]
    assert not any(noise in log for noise in (*DRAMATIQ_EVERY_3S, "Traceback")), log
