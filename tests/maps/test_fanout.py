"""Fanned-out maps on the embedded worker, on both storage backends: the caller gets the run
`running` at the map, the run is resumed once every element settled, results in order, bounded
in-flight elements, atomic and non-atomic failure, rollback (api.md §4 "Maps")."""

from __future__ import annotations

import threading

import anyio
import pytest

import reactorflow as rf
from tests.helpers import unique
from tests.maps.flows import Batch, Window, saga


def fanned(*, batch_size: int = 3, atomic: bool = True, undo_all: bool = False
           ) -> tuple[rf.Reactor, list[str], Window]:
    return saga(fan_out=True, batch_size=batch_size, atomic=atomic, undo_all=undo_all)


async def test_the_caller_gets_the_run_running_and_it_completes_in_order(
        storage: rf.Storage) -> None:
    flow, _log, peak = fanned(batch_size=3)
    items = list(range(25))
    run = await flow.run(tag="a", items=items)
    assert run.status is rf.Status.RUNNING  # parked at the map: nothing held
    assert run.steps["square"].status == "running"
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == sum(i * i for i in items)
    assert sorted(peak.started) == items  # each element once
    assert peak.peak <= 3  # measured: never more than batch_size in flight
    assert await storage.count_elements(run.id, "square") == 25
    assert [e.kind for e in done.history].count("run.completed") == 1


async def test_atomic_fan_out_failure_rolls_back_completed_elements(storage: rf.Storage) -> None:
    flow, log, peak = fanned(batch_size=2)
    run = await flow.run(tag="f", items=list(range(8)), fail=[2])
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.FAILED
    assert done.error is not None and done.error.step == "square"
    assert done.error.type == "ValueError" and "element 2 broke" in done.error.message
    assert log.count("compensate:2:element 2 broke") == 1
    undone = [int(e.split(":")[1]) for e in log if e.startswith("undo:")]
    assert undone == sorted(undone, reverse=True)  # highest index first
    assert 2 not in undone
    assert set(undone) == {i for i in peak.started if i != 2}
    assert log[-1] == "unprepare:p-f"


async def test_non_atomic_fan_out_completes_with_every_outcome(storage: rf.Storage) -> None:
    flow, log, _peak = fanned(batch_size=4, atomic=False)
    run = await flow.run(tag="n", items=list(range(10)), fail=[3, 7])
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    assert done.value == sum(i * i for i in range(10) if i not in (3, 7))
    assert sorted(e for e in log if e.startswith("compensate")) == [
        "compensate:3:element 3 broke", "compensate:7:element 7 broke"]


async def test_fan_out_undo_all_on_a_later_failure(storage: rf.Storage) -> None:
    flow, log, _peak = fanned(batch_size=4, undo_all=True)
    run = await flow.run(tag="u", items=[3, 1, 2], late=True)
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.FAILED
    assert log[1:] == ["undo_all:p-u:[9, 1, 4]", "unprepare:p-u"]


async def test_an_empty_fan_out_map_completes_without_parking(storage: rf.Storage) -> None:
    flow, _log, _peak = fanned()
    run = await flow.run(tag="e", items=[])
    assert run.status is rf.Status.COMPLETED
    assert run.value == 0


@pytest.mark.parametrize("atomic", [True, False])
async def test_duplicate_element_deliveries_are_harmless(storage: rf.Storage,
                                                          atomic: bool) -> None:
    from reactorflow.runtime.services import job_handling as jobs

    flow, _log, peak = fanned(batch_size=2, atomic=atomic)
    run = await flow.run(tag="d", items=[1, 2, 3])
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    before = list(peak.started)
    for index in range(3):  # late duplicates of every element
        await jobs.execute_element(run.id, flow.name, "square", index)
    assert peak.started == before  # a settled element never runs again
    assert (await flow.get(run.id)).status is rf.Status.COMPLETED


class Dropping:
    """The registered queue, except that the first delivery of chosen element jobs is lost
    (as with a worker killed after taking the message)."""

    def __init__(self, inner: object, drop: set[int]) -> None:
        self.inner = inner
        self.drop = set(drop)
        self.dropped: list[int] = []

    @property
    def shared(self) -> bool:
        return False

    def enqueue(self, job: object, *, delay: float | None = None) -> None:
        from reactorflow.runtime.engine.job_queue import JobKind

        if getattr(job, "kind", None) is JobKind.ELEMENT and job.index in self.drop:  # type: ignore[attr-defined]
            self.drop.discard(job.index)  # type: ignore[attr-defined]
            self.dropped.append(job.index)  # type: ignore[attr-defined]
            return
        self.inner.enqueue(job, delay=delay)  # type: ignore[attr-defined]


async def test_the_sweeper_redispatches_lost_element_jobs(storage: rf.Storage) -> None:
    from reactorflow.runtime.engine import job_queue as queue

    flow, _log, peak = fanned(batch_size=2)
    inner = queue.current()
    dropping = Dropping(inner, {1})
    queue.register(lambda: dropping)
    try:
        rf.configure(stall_timeout=3600, async_wait_timeout=3600)  # no fallback re-check
        run = await flow.run(tag="s", items=list(range(6)))
        assert run.status is rf.Status.RUNNING
        # elements are enqueued in index order across the map, one per settled element: the
        # others went on; element 1 was lost, and the map waits for it
        with anyio.fail_after(20):
            while await storage.count_elements(run.id, "square") < 5:
                await anyio.sleep(0.02)
        assert dropping.dropped == [1]
        assert (await flow.get(run.id)).status is rf.Status.RUNNING
        assert await storage.count_elements(run.id, "square") == 5
        assert (await rf.sweep_once()).recovered == []  # within stall_timeout: left alone
        rf.configure(stall_timeout=0.01)
        await anyio.sleep(0.05)
        report = await rf.sweep_once()
        assert report.recovered == [run.id]
        done = await flow.wait(run.id, timeout=30)
    finally:
        queue.register(lambda: inner)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == sum(i * i for i in range(6))
    assert sorted(peak.started) == list(range(6))


async def test_an_owner_never_resumed_is_resumed_by_the_sweeper(storage: rf.Storage) -> None:
    """Every element settled, but the run job their signal enqueued was lost."""
    from reactorflow.runtime.engine import job_queue as queue
    from reactorflow.runtime.engine.job_queue import JobKind

    flow, _log, _peak = fanned(batch_size=3)
    inner = queue.current()
    lost: list[str] = []
    caller = threading.get_ident()
    held: list[object] = []  # the caller's element jobs, until it parked at the map

    class NoResume:
        shared = False

        def enqueue(self, job: object, *, delay: float | None = None) -> None:
            if getattr(job, "kind", None) is JobKind.RUN:
                lost.append("run")
                return
            if threading.get_ident() == caller and getattr(job, "kind", None) is JobKind.ELEMENT:
                held.append(job)  # else all four might settle before the caller looks
                return
            inner.enqueue(job, delay=delay)  # type: ignore[arg-type]

    queue.register(NoResume)  # type: ignore[arg-type, return-value]
    try:
        rf.configure(stall_timeout=0.01, async_wait_timeout=3600)
        run = await flow.run(tag="o", items=[1, 2, 3, 4])
        assert run.status is rf.Status.RUNNING and run.history[-1].kind == "run.parked"
        for job in held:
            inner.enqueue(job)  # type: ignore[arg-type]
        with anyio.fail_after(20):
            while await storage.count_elements(run.id, "square") < 4:
                await anyio.sleep(0.02)
        assert (await flow.get(run.id)).status is rf.Status.RUNNING
        await anyio.sleep(0.05)
        report = await rf.sweep_once()
    finally:
        queue.register(lambda: inner)
    assert report.recovered == [run.id]
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    assert done.value == 1 + 4 + 9 + 16
    assert lost  # the signal (and the delayed re-check) were lost


async def test_fan_out_rollback_undoes_batch_size_at_a_time_highest_first(
        storage: rf.Storage) -> None:
    import anyio as _anyio

    flow = rf.Reactor(unique("fanundo"), inputs=Batch)
    window = Window()
    started: list[int] = []

    @flow.map_step(over="items", fan_out=True, batch_size=3)
    async def each(item: int) -> int:
        return item

    @each.undo
    async def back(result: int) -> None:
        started.append(result)
        await window.enter(result)
        await _anyio.sleep(0.01)

    @flow.step
    async def boom(each: list[int]) -> None:
        raise RuntimeError("boom")

    run = await flow.wait((await flow.run(tag="b", items=list(range(10)))).id, timeout=30)
    assert run.status is rf.Status.FAILED
    assert started == list(range(9, -1, -1))  # started highest index first
    assert 1 < window.peak <= 3  # concurrent, at most batch_size


@pytest.mark.parametrize("storage", ["cluster"], indirect=True)
async def test_a_fan_out_map_completes_on_a_redis_cluster(storage: rf.Storage) -> None:
    """The cluster lane: run state and element slots in the run's slot, indexes elsewhere."""
    await test_the_caller_gets_the_run_running_and_it_completes_in_order(storage)
