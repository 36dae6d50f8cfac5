"""Fanned-out maps enqueue their elements in index order across the whole map (one more per
settled element, claimed with its outcome), not per chain, on both storage backends."""

from __future__ import annotations

import threading

import anyio

import reactorflow as rf
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_queue import Job, JobKind
from tests.helpers import unique
from tests.maps.flows import Batch


class Recording:
    shared = False

    def __init__(self, inner: queue.JobQueue) -> None:
        self.inner = inner
        self.elements: list[int] = []
        self.lock = threading.Lock()

    def enqueue(self, job: Job, *, delay: float | None = None) -> None:
        if job.kind is JobKind.ELEMENT:
            with self.lock:
                self.elements.append(job.index)
        self.inner.enqueue(job, delay=delay)


async def test_elements_are_enqueued_in_index_order_across_the_map(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("order"), inputs=Batch)
    last_ran = threading.Event()

    @flow.map_step(over="items", fan_out=True, batch_size=2)
    async def each(item: int) -> int:
        if item == 0:  # slow: the other elements all run before it settles
            with anyio.fail_after(20):
                while not last_ran.is_set():
                    await anyio.sleep(0.005)
        if item == 5:
            last_ran.set()
        return item

    inner = queue.current()
    recording = Recording(inner)
    queue.register(lambda: recording)
    try:
        run = await flow.wait((await flow.run(tag="o", items=list(range(6)))).id, timeout=30)
    finally:
        queue.register(lambda: inner)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == list(range(6))
    assert recording.elements == list(range(6))  # 2 was not held back behind slow 0


async def test_element_jobs_send_their_successors_off_the_event_loop(
        storage: rf.Storage) -> None:
    """A broker's send blocks on its round trip: element jobs hand the jobs they enqueue to
    their worker thread, which sends them once the job's coroutine is done, never from the
    worker's event loop thread (which runs every job's coroutine)."""
    from dramatiq.asyncio import get_event_loop_thread

    flow = rf.Reactor(unique("offloop"), inputs=Batch)

    @flow.map_step(over="items", fan_out=True, batch_size=2)
    async def each(item: int) -> int:
        return item

    sent_from: list[threading.Thread] = []
    inner = queue.current()

    class Where(Recording):
        def enqueue(self, job: Job, *, delay: float | None = None) -> None:
            if job.kind is JobKind.ELEMENT and job.index >= 2:  # sent by an element job
                sent_from.append(threading.current_thread())
            super().enqueue(job, delay=delay)

    queue.register(lambda: Where(inner))
    try:
        run = await flow.wait((await flow.run(tag="l", items=list(range(8)))).id, timeout=30)
    finally:
        queue.register(lambda: inner)
    assert run.status is rf.Status.COMPLETED and run.value == list(range(8))
    loop_thread = get_event_loop_thread()
    assert loop_thread is not None
    assert len(sent_from) == 6
    assert all(thread is not loop_thread for thread in sent_from)
