"""The real-worker lane: `reactorflow worker` subprocesses on the suite's Redis, for every case
where a caller blocks on work another process does."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.workers.broker import QUEUE, actors_for, send
from tests.helpers import redis_namespace
from tests.workflows import background as bg

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


class Workers:
    """`reactorflow worker <module>` (tests.workflows.background by default) in its own process
    group."""

    def __init__(self, lane: Shared, gates: Path, lock_ttl: float = 2.0, *,
                 module: str = "tests.workflows.background", threads: int = 4,
                 env: dict[str, str] | None = None) -> None:
        env = dict(os.environ, REACTORFLOW_REDIS_URL=lane.url, PYTHONPATH=str(ROOT),
                   **{bg.LOG_ENV: str(lane.log), bg.GATE_ENV: str(gates),
                      bg.LOCK_TTL_ENV: str(lock_ttl), bg.NAMESPACE_ENV: lane.namespace},
                   **(env or {}))
        log = lane.log
        self.terminated = False
        self.stderr = log.with_suffix(".stderr").open("a")  # the workers' logs, for debugging
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reactorflow", "-v", "worker", module,
             "--processes", "1", "--threads", str(threads)],
            cwd=ROOT, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=self.stderr,
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.stderr.close()

    def terminate(self) -> None:
        """Ask the master to stop its workers, once (a second SIGTERM kills them at once)."""
        if self.proc.poll() is None and not self.terminated:
            self.proc.send_signal(signal.SIGTERM)
            self.terminated = True

    def stop(self) -> None:
        """Stop gracefully (`terminate`, then wait), else kill; several workers stop at once
        when each is terminated first."""
        if self.proc.poll() is None:
            self.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)
        self.kill()


@dataclass(frozen=True)
class Shared:
    """The lane's Redis, its own key namespace (storage and queues), and the notes file."""

    url: str
    namespace: str
    log: Path


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    path = tmp_path / "gates"
    path.mkdir()
    return path


@pytest.fixture
async def shared(redis_url: str, tmp_path: Path, gates: Path,
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Shared]:
    """Storage and broker in a key namespace of this test's own, as the workers see them."""
    lane = Shared(redis_url, redis_namespace("workers"), tmp_path / "notes.log")
    monkeypatch.setenv(bg.LOG_ENV, str(lane.log))
    monkeypatch.setenv(bg.GATE_ENV, str(gates))
    storage, broker = bg.namespaced(lane.url, lane.namespace)
    rf.configure(storage=storage, broker=broker, lock_ttl=2.0, stall_timeout=0.5)
    try:
        yield lane
    finally:
        config.reset()
        await storage.aclose()


@pytest.fixture
def workers(shared: Shared, gates: Path) -> Iterator[Workers]:
    started = Workers(shared, gates)
    yield started
    started.stop()


async def _ready(workers: Workers) -> None:
    """A first dispatch round-trips through the worker (it is up)."""
    run = await bg.dispatched.dispatch()
    await bg.dispatched.wait(run.id, timeout=30)


async def test_dispatch_and_wait_across_processes(shared: Shared,
                                                  workers: Workers) -> None:
    await _ready(workers)
    log = shared.log
    run = await bg.dispatched.dispatch()
    assert run.status is rf.Status.RUNNING
    done = await bg.dispatched.wait(run.id, timeout=20)
    assert done.value == 42
    ran_in = bg.pids(log, "only")
    assert ran_in and os.getpid() not in ran_in


async def test_hand_off_runs_the_rest_in_the_worker(shared: Shared,
                                                    workers: Workers) -> None:
    await _ready(workers)
    log = shared.log
    run = await bg.handoff.run()
    assert run.status is rf.Status.RUNNING
    done = await bg.handoff.wait(run.id, timeout=20)
    assert done.value == "h1h2h3"
    assert bg.pids(log, "h1") == {os.getpid()}
    assert os.getpid() not in bg.pids(log, "h2") | bg.pids(log, "h3")
    assert bg.notes(log).count("h2") == 1 and bg.notes(log).count("h3") == 1


async def test_async_step_reader_waits_for_the_worker(shared: Shared,
                                                      workers: Workers) -> None:
    await _ready(workers)
    log = shared.log
    run = await bg.units.run(order_id="R1")
    assert run.status is rf.Status.COMPLETED
    assert os.getpid() not in bg.pids(log, "send_email attempt 1")
    assert bg.pids(log, "strict read mail:R1") == {os.getpid()}
    failed = await bg.units.run(order_id="R2", fail=True)
    assert failed.status is rf.Status.FAILED
    assert bg.notes(log).count("unsend ConnectionError") == 1


async def test_resume_in_background_completes_in_the_worker(shared: Shared,
                                                            workers: Workers) -> None:
    await _ready(workers)
    log = shared.log
    paused = await bg.late.run()
    handed = await bg.late.continue_(paused.id, step="approve", payload={"ok": True})
    assert handed.status is rf.Status.RUNNING
    done = await bg.late.wait(paused.id, timeout=20)
    assert done.value == "approved=True"
    assert os.getpid() not in bg.pids(log, "after_pause")


async def test_duplicate_and_stray_messages_change_nothing(shared: Shared,
                                                           workers: Workers) -> None:
    await _ready(workers)
    log = shared.log
    done = await bg.handoff.run()
    done = await bg.handoff.wait(done.id, timeout=20)
    paused = await bg.late.run()
    broker = config.settings().broker
    actor = actors_for(broker).execute_run
    for run_id, name in ((done.id, bg.handoff.name), (paused.id, bg.late.name),
                         ("missing-run", bg.handoff.name)):
        for _ in range(3):
            send(actor.message(run_id, name, 0), broker, None)
    # every message was taken and acknowledged by the workers (none is queued or in flight)
    await anyio.to_thread.run_sync(functools.partial(broker.join, QUEUE, timeout=30_000))
    stray = "reactorflow.worker.stray run_id=missing-run"
    with anyio.fail_after(20):  # the workers' log lines reach the file through their master
        while log.with_suffix(".stderr").read_text().count(stray) < 3:
            await anyio.sleep(0.05)
    assert (await bg.handoff.get(done.id)).history == done.history
    assert (await bg.late.get(paused.id)).history == paused.history
    assert bg.notes(log).count("h2") == 1 and bg.notes(log).count("h3") == 1


async def _ran_k2_again(run_id: str, log: Path) -> None:
    """The killed run completes; its steps each ran once, but `k2` (the one in flight at the
    kill) started twice, with the same idempotency key both times, and finished once."""
    done = await bg.killable.wait(run_id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    lines = bg.notes(log)
    starts = [line for line in lines if line.startswith("k2 start")]
    assert lines.count("k1") == 1 and lines.count("k3") == 1
    assert lines.count("k2 done") == 1
    assert len(starts) == 2 and len(set(starts)) == 1


def _stop_both(killed: Workers, second: Workers | None) -> None:
    killed.kill()
    if second is not None:
        second.stop()


async def _killable_running_in(workers: Workers, log: Path) -> str:
    """Once `workers` is up, dispatch a `killable` run and wait until its `k2` runs there (the
    only worker yet); returns the run's id."""
    await _ready(workers)
    run = await bg.killable.dispatch()
    with anyio.fail_after(20):
        while not any(line.startswith("k2 start") for line in bg.notes(log)):
            await anyio.sleep(0.02)
    return run.id


async def test_killed_worker_is_recovered_by_the_sweeper(shared: Shared,
                                                         gates: Path) -> None:
    log = shared.log
    first = Workers(shared, gates, lock_ttl=1.0)
    second: Workers | None = None
    try:
        run_id = await _killable_running_in(first, log)
        first.kill()  # SIGKILL mid-step: no chance to write anything
        (gates / "k2").touch()
        await anyio.sleep(1.6)  # past the lock TTL and the stall timeout
        second = Workers(shared, gates, lock_ttl=1.0)
        report = await rf.sweep_once()
        assert run_id in report.enqueued
        await _ran_k2_again(run_id, log)
    finally:
        _stop_both(first, second)


async def test_a_killed_workers_run_is_taken_over_without_a_sweep(shared: Shared,
                                                                  gates: Path) -> None:
    """No sweep runs, and the broker redelivers the dead worker's job only after its heartbeat
    timeout (Dramatiq's Redis broker: 60 s): the surviving worker's take-over watch finds the
    run whose lock lapsed and hands it on; the interrupted step runs again, once."""
    log = shared.log
    first = Workers(shared, gates, lock_ttl=1.0)
    second: Workers | None = None
    try:
        run_id = await _killable_running_in(first, log)
        second = Workers(shared, gates, lock_ttl=1.0)
        first.kill()  # SIGKILL mid-step: its lock lapses, nothing releases it
        (gates / "k2").touch()
        await _ran_k2_again(run_id, log)
    finally:
        _stop_both(first, second)


async def test_sweeper_hands_a_lost_async_unit_to_workers(shared: Shared,
                                                          gates: Path) -> None:
    """A unit whose job never reached a worker (its dispatcher died after the marker) runs
    again when swept, exactly once."""
    log = shared.log
    run = await bg.fire_and_forget.run(order_id="L1")  # no worker yet: the unit stays queued
    assert run.steps["background_mail"].status == "running"
    _flush_queue(shared)  # the job is lost
    await anyio.sleep(0.6)
    workers = Workers(shared, gates)
    try:
        report = await rf.sweep_once()
        assert f"{run.id}:background_mail" in report.enqueued
        with anyio.fail_after(30):
            while (await bg.fire_and_forget.get(run.id)).steps["background_mail"].status \
                    != "completed":
                await anyio.sleep(0.05)
        assert bg.notes(log).count("background_mail") == 1
    finally:
        workers.stop()


def _flush_queue(lane: Shared) -> None:
    """Drop every queued job of this lane (its queues only)."""
    import redis

    client = redis.Redis.from_url(lane.url)
    try:
        for key in client.scan_iter(match=f"{lane.namespace}-dramatiq:*"):
            client.delete(key)
    finally:
        client.close()


def test_worker_refuses_to_start_without_a_shared_broker(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REACTORFLOW_REDIS_URL"}
    env["PYTHONPATH"] = str(ROOT)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "reactorflow", "worker", "tests.workflows.background"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode != 0
    assert "REACTORFLOW_REDIS_URL" in result.stderr + result.stdout
    assert time.monotonic() - started < 60
