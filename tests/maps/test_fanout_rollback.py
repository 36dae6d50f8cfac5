"""A fanned-out map's rollback as undo jobs on the embedded worker, on both storage backends:
completed elements undone by worker jobs in throws of `batch_size`, highest index first, each
outcome saved in the element's slot, the owner parked `rolling_back` and resumed once per throw;
lost undo jobs re-dispatched by the sweeper (api.md §4 "Maps", issue 10 items 5 and 6)."""

from __future__ import annotations

import threading
from collections import Counter

import anyio

import reactorflow as rf
from reactorflow import records
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_queue import Job, JobKind
from tests.helpers import unique
from tests.maps.flows import Batch, Window


class Recording:
    """The registered queue, recording every job; the first delivery of the undo jobs of the
    indices in `drop` is lost (as with a worker killed after taking the message).

    The caller's element jobs (enqueued by the test's own thread, the one running `run()`) can
    be held back until `release()`, so the caller parks at the map with its elements still out
    (`hold=True`); or passed on with the caller kept waiting, once it enqueued `settle` of them,
    until the map's last element re-enqueued the run, so the caller finds the map settled and
    goes on itself."""

    shared = False

    def __init__(self, inner: queue.JobQueue, drop: set[int] | None = None, *,
                 hold: bool = False, settle: int = 0) -> None:
        self.inner = inner
        self.drop = set(drop or ())
        self.dropped: list[int] = []
        self.jobs: list[Job] = []
        self.lock = threading.Lock()
        self.caller = threading.get_ident()
        self.held: list[Job] | None = [] if hold else None
        self.settle = settle
        self.run_enqueued = threading.Event()

    def enqueue(self, job: Job, *, delay: float | None = None) -> None:
        by_caller = threading.get_ident() == self.caller and job.kind is JobKind.ELEMENT
        with self.lock:
            self.jobs.append(job)
            if job.kind is JobKind.UNDO and job.index in self.drop:
                self.drop.discard(job.index)
                self.dropped.append(job.index)
                return
            if job.kind is JobKind.RUN:
                self.run_enqueued.set()
            if by_caller and self.held is not None:
                self.held.append(job)
                return
        self.inner.enqueue(job, delay=delay)
        if by_caller and self.settle:
            self.settle -= 1
            if not self.settle:
                assert self.run_enqueued.wait(30), "the map's elements never all settled"

    def release(self) -> None:
        """Pass the held element jobs on."""
        with self.lock:
            held, self.held = self.held or [], None
        for job in held:
            self.inner.enqueue(job)

    def of(self, kind: JobKind) -> list[Job]:
        with self.lock:
            return [j for j in self.jobs if j.kind is kind]


async def stalled_sweep(run_id: str) -> list[str]:
    """With a tiny `stall_timeout`, sweep until the sweeper takes the run on (once its last
    write is older than that); what the sweep recovered."""
    rf.configure(stall_timeout=0.01)
    with anyio.fail_after(30):
        while not (report := await rf.sweep_once()).recovered:
            await anyio.sleep(0.02)
    return report.recovered


def undo_saga(*, batch_size: int, fail_undo: int | None = None
              ) -> tuple[rf.Reactor, list[tuple[int, str]], Window]:
    flow = rf.Reactor(unique("fanjobs"), inputs=Batch)
    undone: list[tuple[int, str]] = []
    window = Window()

    @flow.map_step(over="items", fan_out=True, batch_size=batch_size)
    async def each(item: int, tag: str) -> int:
        return item * 10

    @each.undo
    async def back(result: int, item: int, tag: str) -> None:
        undone.append((item, threading.current_thread().name))
        await window.enter(item)
        await anyio.sleep(0.005)
        if item == fail_undo:
            raise OSError(f"cannot undo {item}")

    @flow.step
    async def boom(each: list[int]) -> None:
        raise RuntimeError("boom")

    return flow, undone, window


async def test_completed_elements_are_undone_by_worker_jobs_in_throws(
        storage: rf.Storage) -> None:
    flow, undone, window = undo_saga(batch_size=3)
    inner = queue.current()
    recording = Recording(inner, hold=True)  # the caller parks at the map with its elements out
    queue.register(lambda: recording)
    try:
        run = await flow.run(tag="t", items=list(range(10)))
        assert run.status is rf.Status.RUNNING and run.history[-1].kind == "run.parked"
        recording.release()
        done = await flow.wait(run.id, timeout=60)
    finally:
        queue.register(lambda: inner)
    assert done.status is rf.Status.FAILED, done.error
    assert done.error is not None and done.error.step == "boom"
    assert [item for item, _ in undone] == list(range(9, -1, -1))  # once each, highest first
    assert all(name != threading.current_thread().name for _, name in undone)  # in workers
    assert window.peak <= 3  # at most batch_size at a time
    assert sorted(j.index for j in recording.of(JobKind.UNDO)) == list(range(10))
    slots = await storage.load_elements(run.id, "each", 0, 10)
    assert all(raw is not None and records.decode_element(raw).status == "undone"
               for raw in slots)
    kinds = [e.kind for e in done.history]
    assert kinds.count("run.parked") >= 1 + 4  # the map, then once per throw (3, 3, 3, 1)
    assert done.steps["each"].status == "undone"


async def test_a_failing_undo_job_is_recorded_and_the_rollback_goes_on(
        storage: rf.Storage) -> None:
    flow, undone, _window = undo_saga(batch_size=2, fail_undo=3)
    run = await flow.wait((await flow.run(tag="f", items=list(range(6)))).id, timeout=60)
    assert run.status is rf.Status.FAILED and run.error is not None
    assert [item for item, _ in undone] == list(range(5, -1, -1))
    assert [(f.step, f.kind, f.type) for f in run.error.rollback_failures] == [
        ("each", "undo", "OSError")]
    assert "element 3" in run.error.rollback_failures[0].message
    third = records.decode_element((await storage.load_elements(run.id, "each", 3, 1))[0]
                                   or b"")
    assert third.status == "completed" and third.rollback_error is not None


async def test_the_sweeper_redispatches_lost_undo_jobs(storage: rf.Storage) -> None:
    flow, undone, _window = undo_saga(batch_size=2)
    inner = queue.current()
    # the second throw's first undo (3, 2 | ... 2) is lost; the caller parks at the map (else
    # the map's last element's run job, refused while the caller held the run, could reach a
    # worker later and finish the rollback as soon as the sweep below shortens stall_timeout)
    recording = Recording(inner, drop={2}, hold=True)
    queue.register(lambda: recording)
    try:
        rf.configure(stall_timeout=3600, async_wait_timeout=3600)  # no fallback re-check
        run = await flow.run(tag="s", items=list(range(6)))
        recording.release()
        with anyio.fail_after(30):
            while not recording.dropped:
                await anyio.sleep(0.02)
            while (await storage.lock_owner(run.id)) is not None or (
                    await flow.get(run.id)).history[-1].kind != "run.parked":
                await anyio.sleep(0.02)
        parked = await flow.get(run.id)
        assert parked.status is rf.Status.ROLLING_BACK  # parked at the map, nothing held
        assert [item for item, _ in undone] == [5, 4, 3]  # 2 was lost: the throw waits
        assert (await rf.sweep_once()).recovered == []  # within stall_timeout: left alone
        assert await stalled_sweep(run.id) == [run.id]
        done = await flow.wait(run.id, timeout=30)
    finally:
        queue.register(lambda: inner)
    assert done.status is rf.Status.FAILED, done.error
    assert done.error is not None and done.error.rollback_failures == []
    assert recording.dropped == [2]
    assert Counter(item for item, _ in undone) == Counter(range(6))  # each undone once
    assert [item for item, _ in undone] == [5, 4, 3, 2, 1, 0]


async def test_a_rollback_resumed_after_a_crash_skips_the_saved_undos(
        storage: rf.Storage) -> None:
    """An undo job whose worker died after saving some undos: the throw resumes after the last
    saved undo (the element slots say which are done)."""
    flow, undone, _window = undo_saga(batch_size=4)
    inner = queue.current()
    # the first throw: 7, 6 undone, 5 lost (and 4); the caller parks at the map (see above)
    recording = Recording(inner, drop={5}, hold=True)
    queue.register(lambda: recording)
    try:
        rf.configure(stall_timeout=3600, async_wait_timeout=3600)
        run = await flow.run(tag="c", items=list(range(8)))
        recording.release()

        async def saved() -> list[str]:
            return [records.decode_element(raw or b"").status
                    for raw in await storage.load_elements(run.id, "each", 4, 4)]

        with anyio.fail_after(30):
            while not recording.dropped or (await storage.lock_owner(run.id)) is not None or (
                    await flow.get(run.id)).history[-1].kind != "run.parked" or (
                    await saved())[2:] != ["undone", "undone"]:
                await anyio.sleep(0.02)
        assert [item for item, _ in undone] == [7, 6]
        assert await saved() == ["completed", "completed", "undone", "undone"]
        assert await stalled_sweep(run.id) == [run.id]
        done = await flow.wait(run.id, timeout=30)
    finally:
        queue.register(lambda: inner)
    assert done.status is rf.Status.FAILED
    assert [item for item, _ in undone] == [7, 6, 5, 4, 3, 2, 1, 0]  # 7 and 6 not again


async def test_an_undo_job_given_up_fails_that_undo_and_the_rollback_goes_on(
        storage: rf.Storage) -> None:
    """The queue gave up on an undo job (its retries used up): the element's undo is failed
    with the reason and acknowledged, so its throw settles and the rollback goes on."""
    from reactorflow.runtime.services import job_handling as jobs

    flow, undone, _window = undo_saga(batch_size=2)
    inner = queue.current()
    recording = Recording(inner, drop={4})  # the first throw: 5 undone, 4 lost
    queue.register(lambda: recording)
    try:
        rf.configure(stall_timeout=3600, async_wait_timeout=3600)
        run = await flow.run(tag="g", items=list(range(6)))
        with anyio.fail_after(30):
            while not recording.dropped or (await storage.lock_owner(run.id)) is not None or (
                    await flow.get(run.id)).history[-1].kind != "run.parked":
                await anyio.sleep(0.02)
        await jobs.give_up(Job.undo(run.id, flow.name, "each", 4, version=1),
                           "the job failed 3 times")
        done = await flow.wait(run.id, timeout=30)
    finally:
        queue.register(lambda: inner)
    assert done.status is rf.Status.FAILED and done.error is not None
    assert [item for item, _ in undone] == [5, 3, 2, 1, 0]  # 4 was never undone
    assert [(f.step, f.kind, f.type) for f in done.error.rollback_failures] == [
        ("each", "undo", "JobRetriesExhausted")]
    assert "element 4" in done.error.rollback_failures[0].message


async def test_a_caller_that_starts_the_rollback_gets_the_run_back_parked_at_the_throw(
        storage: rf.Storage) -> None:
    """The map's elements all settled before the caller looked (it goes on itself) and a later
    step fails: the caller's `run()` parks the run `rolling_back` at the map's first throw and
    returns it, as it returns a run parked at the map going forward; the workers finish the
    rollback. (It used to wait in its process for every throw: with an undo job lost, `run()`
    did not return before `stall_timeout`.)"""
    flow, undone, _window = undo_saga(batch_size=2)
    inner = queue.current()
    recording = Recording(inner, settle=2)
    queue.register(lambda: recording)
    try:
        run = await flow.run(tag="p", items=list(range(5)))
        assert run.status is rf.Status.ROLLING_BACK, run.status
        kinds = [e.kind for e in run.history]
        assert "run.parked" not in kinds[:kinds.index("run.rolling_back")]  # the map never parked
        assert kinds[-1] == "run.parked"
        done = await flow.wait(run.id, timeout=30)
    finally:
        queue.register(lambda: inner)
    assert done.status is rf.Status.FAILED and done.error is not None
    assert done.error.step == "boom" and done.error.rollback_failures == []
    assert [item for item, _ in undone] == [4, 3, 2, 1, 0]
