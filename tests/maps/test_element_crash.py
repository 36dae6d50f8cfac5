"""An element of an atomic fanned-out map cut off mid-body (its worker died) after another
element failed: its side effect may have happened, so it is run again (never stored `skipped`)
and undone with the map's rollback; an element that never started is skipped."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_queue import JobKind
from reactorflow.runtime.maps.fanout import element_lock
from reactorflow.runtime.services import job_handling as jobs
from tests.helpers import unique, until_lock_lapses


class Items(msgspec.Struct):
    items: list[int]


class Holding:
    """The registered queue, except that element jobs are kept for the test to run (as a
    worker would take them), one by one, in the order it chooses."""

    def __init__(self, inner: queue.JobQueue) -> None:
        self.inner = inner
        self.held: list[int] = []

    @property
    def shared(self) -> bool:
        return False

    def enqueue(self, job: queue.Job, *, delay: float | None = None) -> None:
        if job.kind is JobKind.ELEMENT:
            self.held.append(job.index)
            return
        self.inner.enqueue(job, delay=delay)


@pytest.fixture
def holding() -> Iterator[Holding]:
    inner = queue.current()
    held = Holding(inner)
    queue.register(lambda: held)
    try:
        yield held
    finally:
        queue.register(lambda: inner)


async def test_an_element_cut_off_mid_body_is_run_again_and_undone_not_skipped(
        storage: rf.Storage, holding: Holding) -> None:
    rf.configure(lock_ttl=0.5)
    flow = rf.Reactor(unique("cutoff"), inputs=Items)
    log: list[str] = []
    hang = anyio.Event()

    @flow.map_step(over="items", fan_out=True, batch_size=3)
    async def charge(item: int) -> int:
        log.append(f"charge:{item}")  # the side effect
        if item == 0:
            raise ValueError("card declined")
        if item == 1 and log.count("charge:1") == 1:
            await hang.wait()  # the worker dies here (cancelled below)
        return item

    @charge.undo
    async def refund(result: int, item: int) -> None:
        log.append(f"refund:{item}")

    run = await flow.run(items=[0, 1, 2])
    assert run.status is rf.Status.RUNNING and sorted(holding.held) == [0, 1, 2]

    async with anyio.create_task_group() as worker:  # element 1's worker, killed mid-body
        worker.start_soon(jobs.execute_element, run.id, flow.name, "charge", 1)
        with anyio.fail_after(10):
            while "charge:1" not in log:
                await anyio.sleep(0.01)
        worker.cancel_scope.cancel()
    await jobs.execute_element(run.id, flow.name, "charge", 0)  # fails: the map stops
    await until_lock_lapses(storage, element_lock(run.id, "charge", 1))
    await jobs.execute_element(run.id, flow.name, "charge", 1)  # its job, dispatched again
    await jobs.execute_element(run.id, flow.name, "charge", 2)  # never started: skipped

    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.FAILED and done.error is not None
    assert "card declined" in done.error.message
    assert log.count("charge:1") == 2  # run again: its outcome is known ...
    assert "refund:1" in log  # ... and it is rolled back
    assert "charge:2" not in log and "refund:2" not in log
    slots = await storage.load_elements(run.id, "charge", 0, 3)
    statuses = [records.decode_element(raw).status for raw in slots if raw is not None]
    assert statuses == ["failed", "undone", "skipped"]
