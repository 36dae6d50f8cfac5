"""Worker heartbeats with real `reactorflow worker` subprocesses: a worker is listed by
`rf.list_workers()` with its process, host, queues, versions and jobs in flight; SIGKILLed, it
is gone once 3 heartbeat intervals passed since its last beat (never before)."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import clock
from reactorflow.workers.broker import QUEUE
from tests.workers.test_real_workers import Shared, Workers, gates, shared  # noqa: F401
from tests.workflows import background as bg

pytestmark = pytest.mark.slow
INTERVAL = 0.3


@pytest.fixture
def beating(shared: Shared, gates: Path) -> Iterator[Workers]:  # noqa: F811
    started = Workers(shared, gates, env={bg.HEARTBEAT_ENV: str(INTERVAL)})
    yield started
    started.stop()


async def _until(found: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `found` until it says yes (failing, naming `what`, after 30 s without)."""
    with anyio.move_on_after(30):
        while not await found():
            await anyio.sleep(0.05)
        return
    pytest.fail(f"never saw {what}")


async def _noted_pid(log: Path, what: str) -> int:
    with anyio.fail_after(30):
        while what not in bg.notes(log):
            await anyio.sleep(0.05)
    (pid,) = bg.pids(log, what)
    return pid


async def test_a_real_worker_is_listed_while_it_works_and_gone_after_sigkill(
        shared: Shared, gates: Path, beating: Workers) -> None:  # noqa: F811
    run = await bg.killable.dispatch()
    pid = await _noted_pid(shared.log, f"k2 start {run.id}:k2")
    mine: list[rf.WorkerInfo] = []

    async def busy() -> bool:
        mine[:] = [w for w in await rf.list_workers() if w.process == pid]
        return bool(mine) and mine[0].jobs_in_flight > 0

    await _until(busy, "the worker listed with its job in flight")
    (info,) = mine
    assert info.host == socket.gethostname()
    assert QUEUE in info.queues
    assert info.versions["tests.bg.killable"] == (1,)  # what its loaded module declares
    assert info.started_at <= info.last_seen
    assert info.last_seen.tzinfo is not None

    beating.kill()  # SIGKILL: it cannot say goodbye
    last_seen = info.last_seen.timestamp()

    async def gone() -> bool:
        nonlocal last_seen
        listed = [w for w in await rf.list_workers() if w.process == pid]
        if listed:
            last_seen = max(last_seen, listed[0].last_seen.timestamp())
        return not listed

    await _until(gone, "the killed worker dropped from the list")
    assert clock.now() >= last_seen + 3 * INTERVAL  # not before 3 intervals
    # and `explain` says so of a run queued now: no live worker serves its queue
    stuck = await bg.dispatched.dispatch()
    [blocker] = await rf.explain(stuck.id)
    assert blocker.kind is rf.BlockerKind.QUEUED and blocker.workers == 0
    assert "no live worker" in blocker.detail


async def test_a_worker_that_stops_cleanly_removes_its_heartbeat(
        shared: Shared, gates: Path, beating: Workers) -> None:  # noqa: F811
    run = await bg.dispatched.dispatch()
    await bg.dispatched.wait(run.id, timeout=30)

    async def idle() -> bool:  # (a beat taken while the job still ran says 1 until the next)
        found = await rf.list_workers()
        return len(found) == 1 and found[0].jobs_in_flight == 0

    await _until(idle, "the worker listed with no job in flight")
    beating.stop()  # SIGTERM: Dramatiq stops its workers, each drops its heartbeat
    # gone at once (not only after expiring): the storage holds no record any more
    storage = rf.configure().storage
    assert storage is not None
    assert await storage.workers(0.0) == []
