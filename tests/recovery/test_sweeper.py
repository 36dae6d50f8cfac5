"""What the sweeper must leave alone, and the order that makes a lost unit recoverable: a run
touched within `stall_timeout`, an async unit whose worker holds its lock or whose job was
dispatched within `stall_timeout`, and an async unit's marker written before its job is enqueued.

(Each of these survived as a deliberate bug before; `tests/mutations/check.py` re-checks.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator

import anyio
import pytest
import redis.exceptions
from dramatiq.brokers.redis import RedisBroker
from dramatiq.brokers.stub import StubBroker

import reactorflow as rf
from reactorflow import records
from reactorflow.storage.contract.values import ClaimResult
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import closed_port, kinds, unfired, unique, until_past
from tests.recovery.test_corrupt import _hanging_flow, _stalled_run, _untouched
from tests.workflows import background as bg


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    """The storage on each backend in turn, the Redis Cluster included (the cluster lane)."""
    async for backend in on_every(request):
        yield backend


async def _older_than(seconds: float, since: float) -> None:
    """Until `seconds` of wall-clock time have passed since `since` (a stored timestamp)."""
    with anyio.fail_after(10 + seconds):
        while time.time() - since <= seconds:
            await anyio.sleep(0.01)


async def test_a_stalled_run_is_left_alone_until_stall_timeout(storage: rf.Storage) -> None:
    entered, log = anyio.Event(), []
    flow = _hanging_flow(entered, log)
    run_id = await _stalled_run(storage, flow, entered)  # no lock holder, touched just now
    rf.configure(stall_timeout=3600)

    report = await rf.sweep_once()
    assert _untouched(report, run_id)  # not stalled for an hour yet
    assert log == ["first", "hangs"]
    assert (await flow.get(run_id)).status is rf.Status.RUNNING

    head = await storage.load_head(run_id)
    assert head is not None
    rf.configure(stall_timeout=0.05)
    await _older_than(0.05, head.touched_at)
    report = await rf.sweep_once()
    assert report.recovered == [run_id]
    assert log == ["first", "hangs", "hangs"]  # re-driven from its checkpoint: `first` kept
    assert (await flow.get(run_id)).status is rf.Status.COMPLETED


def _blocking_unit_flow() -> tuple[rf.Reactor, threading.Event, threading.Event, list[str]]:
    """A run that completes at once, leaving its async unit running in the embedded worker
    until `release` is set."""
    flow = rf.Reactor(unique("unitlock"))
    entered, release, ran = threading.Event(), threading.Event(), []

    @flow.step
    async def first() -> int:
        return 1

    @flow.async_step
    async def unit(first: int) -> str:
        ran.append("unit")
        entered.set()
        await anyio.to_thread.run_sync(release.wait, 30)
        return "sent"

    return flow, entered, release, ran


async def test_a_unit_whose_worker_holds_its_lock_is_not_swept(storage: rf.Storage) -> None:
    flow, entered, release, ran = _blocking_unit_flow()
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert await anyio.to_thread.run_sync(entered.wait, 10)
    (unit,) = [u for u in await storage.scan_units(100) if u.run_id == run.id]
    assert unit.lock_owner is not None  # the worker holds the unit's lock while it runs
    rf.configure(stall_timeout=0.05)
    await _older_than(0.05, unit.dispatched_at)  # old enough: only the lock keeps it

    report = await rf.sweep_once()
    label = f"{run.id}:unit"
    assert label not in report.recovered + report.enqueued
    release.set()
    with anyio.fail_after(10):
        while (await flow.get(run.id)).steps["unit"].status != "completed":
            await anyio.sleep(0.02)
    assert ran == ["unit"]


async def test_a_unit_dispatched_within_stall_timeout_is_not_swept(storage: rf.Storage) -> None:
    """A unit whose job is queued but not yet taken (no lock holder) is left to its job until
    it is older than stall_timeout; then the sweeper enqueues it again."""
    flow = rf.Reactor(unique("unitage"))

    @flow.async_step
    async def unit() -> str:
        return "sent"

    broker = StubBroker()  # no worker consumes it: the job stays queued
    rf.configure(broker=broker, stall_timeout=3600)
    try:
        run = await flow.run()
        assert run.steps["unit"].status == "running"
        label = f"{run.id}:unit"
        (queued,) = [u for u in await storage.scan_units(100) if u.run_id == run.id]
        assert queued.lock_owner is None

        report = await rf.sweep_once()
        assert label not in report.recovered + report.enqueued

        rf.configure(stall_timeout=0.05)
        await _older_than(0.05, queued.dispatched_at)
        report = await rf.sweep_once()
        assert report.enqueued == [label]
    finally:
        broker.close()


async def test_a_unit_marker_is_stored_before_its_job_is_enqueued(storage: rf.Storage) -> None:
    """The broker is down when the unit is dispatched: its marker is already stored, so the
    unit is known (listed for the sweeper) instead of lost."""
    flow = rf.Reactor(unique("unitorder"))

    @flow.step
    async def first() -> int:
        return 1

    @flow.async_step
    async def unit(first: int) -> str:
        return "sent"

    broker = RedisBroker(url=f"redis://127.0.0.1:{closed_port()}/0")
    rf.configure(broker=broker)
    try:
        with pytest.raises((redis.exceptions.ConnectionError, rf.ReactorflowError)):
            await flow.run()
    finally:
        broker.close()
    (stored,) = (await flow.list_runs()).runs
    run = await flow.get(stored.id)
    assert run.steps["first"].status == "completed"
    assert "async.dispatched:unit" in kinds(run)  # the marker, written before the enqueue
    assert [u.key for u in await storage.scan_units(100) if u.run_id == run.id] == ["unit"]


async def test_a_paused_run_whose_resumer_died_after_its_claim_is_resumed(
        storage: rf.Storage) -> None:
    """The resumer's claim was accepted, then it died before taking the run: the sweeper
    applies the claimed payload (no payload is ever stranded)."""
    flow = rf.Reactor(unique("strandedclaim"))
    log: list[str] = []

    @flow.interrupt
    async def approve(payload: bool) -> bool:
        log.append(f"approve {payload}")
        return payload

    @flow.step
    async def after(approve: bool) -> str:
        return f"approved={approve}"

    paused = await flow.run()
    # what the resumer wrote before it died: the validated payload, claimed
    assert await storage.claim(paused.id, "approve", records.encode(True)) is \
        ClaimResult.ACCEPTED
    assert (await flow.get(paused.id)).status is rf.Status.PAUSED

    report = await rf.sweep_once()
    assert report.recovered == [paused.id]
    done = await flow.get(paused.id)
    assert done.status is rf.Status.COMPLETED and done.value == "approved=True"
    assert log == ["approve True"]
    with pytest.raises(rf.AlreadyResumed):
        await flow.continue_(paused.id, step="approve", payload=False)


async def test_an_async_child_whose_parent_was_never_told_is_relayed(
        storage: rf.Storage) -> None:
    """The child of an async_reactor step ended without reporting to its parent (it was
    expired by the sweeper while paused): a later sweep hands the parent the child's end."""
    child = rf.Reactor(unique("quietchild"), inputs=bg.ChildIn)

    @child.step
    async def grow(n: int) -> int:
        return n * 10

    @child.interrupt(timeout=1.0)
    async def approve(payload: bool, grow: int) -> bool:
        return payload

    parent = rf.Reactor(unique("toldparent"))

    @parent.async_reactor(child)
    async def spawn() -> bg.ChildIn:
        return bg.ChildIn(n=2)

    @parent.step
    async def read_child(spawn: rf.Outcome[bool]) -> str:
        return f"child ok={spawn.ok} error={spawn.error.type if spawn.error else None}"

    rf.configure(async_wait_timeout=120)
    run = await parent.dispatch()
    child_id = f"{run.id}-spawn"
    with anyio.fail_after(30):
        while True:
            head = await storage.load_head(child_id)
            if head is not None and head.status == "paused":
                break
            await anyio.sleep(0.02)
    paused_child = await child.get(child_id)
    await unfired(paused_child)  # its timer would fail it (and tell nobody either)
    await until_past(paused_child.timeout_at)
    rf.configure(stall_timeout=0.01)
    first = await rf.sweep_once()
    assert first.expired == [child_id]  # failed by the sweeper: nobody told the parent
    second = await rf.sweep_once()  # the unit sweep relays the child's end to the parent
    assert run.id not in second.failed
    done = await parent.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    assert done.value == "child ok=False error=InterruptExpired"
