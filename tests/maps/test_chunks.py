"""Chunks of a fanned-out map (issue 30, target 1): a worker job carries several consecutive
elements, `chunk_size=` or sized from the measured element cost, each element still settled on
its own, within the `batch_size` window; on the embedded worker and both storage backends (a
worker SIGKILLed mid-chunk: tests/maps/test_chunk_crash.py)."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.definition.specs import MAX_CHUNK, MapOptions
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_queue import Job, JobKind
from reactorflow.runtime.maps import chunks
from tests.helpers import unique


class Items(msgspec.Struct):
    items: list[int]


class Recording:
    """The registered queue, noting every element job sent (as the chunk it is)."""

    def __init__(self, inner: queue.JobQueue) -> None:
        self.inner = inner
        self.elements: list[tuple[int, int]] = []

    @property
    def shared(self) -> bool:
        return self.inner.shared

    def enqueue(self, job: Job, *, delay: float | None = None) -> None:
        if job.kind is JobKind.ELEMENT:
            self.elements.append((job.index, job.count))
        self.inner.enqueue(job, delay=delay)

    def timer_armed(self, due: float) -> None:
        self.inner.timer_armed(due)


@pytest.fixture
def recording() -> Iterator[Recording]:
    kept = Recording(queue.current())
    previous = queue.register(lambda: kept)
    try:
        yield kept
    finally:
        queue.register(previous)


def _covered(jobs: list[tuple[int, int]]) -> list[int]:
    return sorted(i for first, count in jobs for i in range(first, first + count))


async def test_chunk_size_sends_chunks_of_that_many_elements_each_run_once(
        storage: rf.Storage, recording: Recording) -> None:
    flow = rf.Reactor(unique("chunks.fixed"), inputs=Items)
    ran: list[int] = []

    @flow.map_step(over="items", fan_out=True, batch_size=8, chunk_size=3)
    async def double(item: int) -> int:
        ran.append(item)
        return 2 * item

    run = await flow.run(items=list(range(23)))
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == [2 * i for i in range(23)]
    assert sorted(ran) == list(range(23))  # each element once
    # the first window, 8 elements, in whatever order its jobs started (a chunk claimed as an
    # element settles may start before them)
    assert sorted(job for job in recording.elements if job[0] < 8) == [(0, 3), (3, 3), (6, 2)]
    assert all(count <= 3 for _, count in recording.elements)
    assert _covered(recording.elements) == list(range(23))  # each dispatched once, in chunks
    assert any(count == 3 for first, count in recording.elements if first >= 8)  # claimed
    assert await storage.count_elements(run.id, "double") == 23  # settled one by one


async def test_chunks_are_sized_from_the_measured_element_cost(
        storage: rf.Storage, recording: Recording) -> None:
    """Elements of microseconds: the first window goes one element per job (nothing is
    measured yet), then the jobs claim chunks of at most batch_size // SPREAD."""
    flow = rf.Reactor(unique("chunks.measured"), inputs=Items)

    @flow.map_step(over="items", fan_out=True, batch_size=64)
    async def square(item: int) -> int:
        return item * item

    size = 600
    run = await flow.run(items=list(range(size)))
    done = await flow.wait(run.id, timeout=60)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == [i * i for i in range(size)]
    # the first window's jobs one element each, in whatever order they started (a settled
    # element claims the next chunk at once: a chunk may start before the window's last jobs)
    first_window = sorted(job for job in recording.elements if job[0] < 64)
    assert first_window == [(i, 1) for i in range(64)]
    later = [count for first, count in recording.elements if first >= 64]
    assert max(later) == 64 // chunks.SPREAD  # grown to the bound
    assert _covered(recording.elements) == list(range(size))


async def test_slow_elements_keep_one_element_per_job(recording: Recording,
                                                      storage: rf.Storage) -> None:
    """An element that takes longer than a chunk's aim is a chunk of its own."""
    import anyio

    flow = rf.Reactor(unique("chunks.slow"), inputs=Items)

    @flow.map_step(over="items", fan_out=True, batch_size=64)
    async def nap(item: int) -> int:
        await anyio.sleep(chunks.CHUNK_WORK * 2)
        return item

    run = await flow.run(items=list(range(80)))
    done = await flow.wait(run.id, timeout=60)
    assert done.status is rf.Status.COMPLETED, done.error
    assert {count for _, count in recording.elements} == {1}


async def test_an_atomic_failure_mid_chunk_starts_no_later_element_of_the_chunk(
        storage: rf.Storage) -> None:
    """Each element of a chunk is fenced on its own: after the chunk's element 1 failed, its
    elements 2-4 are refused (stored skipped, never run), and element 0 is undone."""
    flow = rf.Reactor(unique("chunks.atomic"), inputs=Items)
    log: list[str] = []

    @flow.map_step(over="items", fan_out=True, batch_size=5, chunk_size=5)
    async def charge(item: int) -> int:
        log.append(f"charge:{item}")
        if item == 1:
            raise ValueError("card declined")
        return item

    @charge.undo
    async def refund(result: int, item: int) -> None:
        log.append(f"refund:{item}")

    run = await flow.run(items=list(range(10)))
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.FAILED and done.error is not None
    assert "card declined" in done.error.message
    assert [e for e in log if e.startswith("charge:")] == ["charge:0", "charge:1"]
    assert "refund:0" in log and "refund:1" not in log
    slots = await storage.load_elements(run.id, "charge", 0, 5)
    statuses = [records.decode_element(raw).status for raw in slots if raw is not None]
    assert statuses == ["undone", "failed", "skipped", "skipped", "skipped"]


async def test_a_duplicate_chunk_runs_no_settled_element_again(storage: rf.Storage) -> None:
    """A chunk delivered again (at least once) finds its elements settled: nothing re-runs."""
    from reactorflow.runtime.services import job_handling as jobs

    flow = rf.Reactor(unique("chunks.duplicate"), inputs=Items)
    ran: list[int] = []

    @flow.map_step(over="items", fan_out=True, batch_size=4, chunk_size=4)
    async def note(item: int) -> int:
        ran.append(item)
        return item

    run = await flow.run(items=list(range(4)))
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED
    await jobs.execute_element(run.id, flow.name, "note", 0, count=4)
    assert sorted(ran) == [0, 1, 2, 3]


def _options(batch_size: int, chunk_size: int | None = None) -> MapOptions:
    return MapOptions(over="items", over_is_step=False, element="item", batch_size=batch_size,
                      fan_out=True, atomic=True, element_type=int, chunk_size=chunk_size)


def test_the_sizer_aims_at_a_few_milliseconds_within_its_bounds() -> None:
    sizer = chunks.Sizer(_options(batch_size=400))
    assert sizer.want() == 1  # nothing measured
    sizer.ran(chunks.CHUNK_WORK / 10)
    assert sizer.want() == 10
    for _ in range(9):
        sizer.ran(0.0)
    assert sizer.want() == 50  # the mean fell to CHUNK_WORK / 100: bounded by 400 // SPREAD
    slow = chunks.Sizer(_options(batch_size=400))
    slow.ran(chunks.CHUNK_WORK * 3)
    assert slow.want() == 1
    huge = chunks.Sizer(_options(batch_size=100_000))
    huge.ran(0.0)
    assert huge.want() == MAX_CHUNK
    fixed = chunks.Sizer(_options(batch_size=400, chunk_size=7))
    fixed.ran(1.0)
    assert fixed.want() == 7
    assert list(chunks.split(10, 7, 3)) == [(10, 3), (13, 3), (16, 1)]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"chunk_size": 0}, "chunk_size=0 must be a whole number from 1 to 10"),
    ({"chunk_size": 11}, "chunk_size=11 must be a whole number from 1 to 10"),
    ({"chunk_size": True}, "chunk_size=True must be a whole number"),
    ({"chunk_size": "4"}, "chunk_size='4' must be a whole number"),
    ({"chunk_size": 4, "fan_out": False}, "applies to a fanned-out map only"),
    ({"chunk_size": MAX_CHUNK + 1, "batch_size": 5000},
     f"from 1 to {MAX_CHUNK} \\(batch_size, at most {MAX_CHUNK}\\)"),
])
def test_a_bad_chunk_size_is_refused_naming_the_step(kwargs: dict[str, object],
                                                     match: str) -> None:
    flow = rf.Reactor(unique("chunks.bad"), inputs=Items)
    options: dict[str, object] = {"batch_size": 10, "fan_out": True, **kwargs}
    with pytest.raises(rf.DefinitionError, match=match) as caught:
        @flow.map_step(over="items", **options)  # type: ignore[arg-type]
        async def pack(item: int) -> int:
            return item
    assert caught.value.step == "pack" and "pack" in str(caught.value)
