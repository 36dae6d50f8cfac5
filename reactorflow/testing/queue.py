"""`EnvironmentQueue`: the runtime's job queue inside a test `Environment`.

Jobs run as tasks on the test's own event loop (so a test sees their effects and their
failures), a delayed job waits on the environment's fake clock, and `drain()` waits until no job
is running or due. A running job that waits for fake time (a retry backoff, a gate's wait, an
async unit's deadline: see `FakeClock`) is waiting for `clock.advance`: settling the clock does
not wait for it, and a `drain()` left with only such jobs raises `DrainStuck` naming each job
and what it waits for. A fanned-out map's element job starts once no execution of this
process holds its run (the owner that enqueued it has parked the run): a run's caller gets it
back `running` at a fanned-out map on every storage, as the docs say, however fast the
elements run (on Redis they used to run while the owner was still writing, and it could
collect them at once and return the run `completed`). A job whose body raises an
infrastructure error is tried again at once (at most `RETRIES` times), then given up
(`jobs.give_up`), as a worker would. A `SimulatedCrash`
ends the job like a killed worker: nothing more happens to it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import anyio.lowlevel

from reactorflow.errors import ReactorflowError
from reactorflow.runtime.engine.job_queue import Job, JobKind
from reactorflow.runtime.engine.lockkeeper import keeper
from reactorflow.runtime.services import job_handling as jobs
from reactorflow.testing.clock import FakeClock, Work, current_work
from reactorflow.testing.crash import SimulatedCrash

log = logging.getLogger("reactorflow.testing")

RETRIES = 3
STUCK_GRACE = 0.2
"""Real seconds every running job must stay waiting for the fake clock, no job beginning or
ending, before `drain()` calls it stuck (the jobs may be woken by work outside the queue, e.g.
the test's own call still writing)."""
STUCK_SAMPLE = 0.01  # real seconds between drain's looks while the jobs wait


def describe(job: Job) -> str:
    """A job as `drain`'s errors name it: kind, reactor, run and step (and element)."""
    text = f"{job.kind}:{job.reactor}:{job.run_id}"
    if job.step:
        text += f":{job.step}"
    if job.kind in (JobKind.ELEMENT, JobKind.UNDO):
        last = job.index + job.count - 1
        text += f"[{job.index}]" if job.count == 1 else f"[{job.index}..{last}]"
    return text


class DrainError(ReactorflowError):
    """`Environment.drain()` ran more jobs than its bound: work keeps arriving."""

    def __init__(self, limit: int, recent: list[Job]) -> None:
        self.limit = limit
        self.recent = recent
        shown = ", ".join(describe(j) for j in recent[-5:])
        super().__init__(f"drain() ran {limit} jobs and work keeps arriving (last: {shown}); "
                         "a run re-enqueues itself without end, or raise the bound with "
                         "drain(limit=...)")


async def _owner_let_go(run_id: str) -> None:
    """Wait until no execution of this process holds the run (it works in real time)."""
    held = True
    while held:  # the lock keeper has no event to wait for: look again shortly
        held = any(hold.run_id == run_id and not hold.released for hold in keeper.holds())
        if held:
            await asyncio.sleep(STUCK_SAMPLE / 10)


class DrainStuck(DrainError):
    """`Environment.drain()` was left with jobs that all wait for the fake clock: nothing more
    happens until the test advances it (`env.clock.advance(...)`) or ends what they wait for.

    Attributes:
        waiting: per job (as `describe` names it), what it waits for.
        now: the fake time when drain gave up.
    """

    def __init__(self, waiting: dict[str, list[str]], now: float) -> None:
        ReactorflowError.__init__(self, "drain() cannot finish: every job still running waits "
                                  "for the fake clock, which only the test moves:\n" + "\n".join(
                                      f"  - job {job} waits for {'; '.join(why)}"
                                      for job, why in waiting.items())
                                  + "\nadvance the clock past what it waits for "
                                  "(`await env.clock.advance(seconds)`) and drain again, or "
                                  "end what it waits for (e.g. continue a paused run holding "
                                  "the gate)")
        self.limit = 0
        self.recent = []
        self.waiting = waiting
        self.now = now


class EnvironmentQueue:
    """Jobs on the test's event loop, delays on the fake clock (see the module)."""

    shared = False

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: FakeClock) -> None:
        self._loop = loop
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._changed = asyncio.Event()  # set whenever a job begins, ends, waits or goes on
        self._live: dict[Work, Job] = {}  # the running jobs, each under its work
        self._moves = 0  # jobs begun or ended so far (drain's stuck check watches it)
        self._unwatch = clock.on_wait_change(self._wait_changed)
        self._thread = threading.get_ident()
        self.started = 0  # jobs started so far (drain bounds this)
        self.history: list[Job] = []  # every job enqueued, in order
        self.crashed: list[Job] = []  # jobs a SimulatedCrash ended

    def timer_armed(self, due: float) -> None:
        """Nothing to start: `clock.advance` fires the timers (the environment's clock hook)."""

    def enqueue(self, job: Job, *, delay: float | None = None) -> None:
        """Run `job` on the test's loop, `delay` fake seconds from now at the earliest."""
        if threading.get_ident() == self._thread and not self._loop.is_closed():
            self._accept(job, delay or 0.0)
        else:
            self._loop.call_soon_threadsafe(self._accept, job, delay or 0.0)

    def _accept(self, job: Job, delay: float) -> None:
        self.history.append(job)
        if delay <= 0:
            self._begin()
        task = self._loop.create_task(self._run(job, delay))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _begin(self) -> None:
        self._running += 1
        self._moves += 1
        self._idle.clear()
        self._changed.set()

    def _end(self) -> None:
        self._running -= 1
        self._moves += 1
        if self._running == 0:
            self._idle.set()
        self._changed.set()

    def _wait_changed(self) -> None:
        if threading.get_ident() == self._thread:
            self._changed.set()
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._changed.set)

    async def _run(self, job: Job, delay: float) -> None:
        if delay > 0:
            await self._clock.sleep(delay)
            self._begin()
        self.started += 1
        work = Work(describe(job))
        self._live[work] = job
        token = current_work.set(work)
        try:
            if job.kind is JobKind.ELEMENT:
                await _owner_let_go(job.run_id)
            await self._attempts(job)
        finally:
            current_work.reset(token)
            del self._live[work]
            self._end()

    def _busy(self) -> bool:
        """Whether a running job is working (not only waiting for the fake clock)."""
        return any(not work.waiting for work in self._live) or self._running > len(self._live)

    def waiting(self) -> dict[str, list[str]]:
        """The running jobs that wait for the fake clock, each with what it waits for."""
        now = self._clock.now()
        return {work.label: [wait.describe(now) for wait in work.waits]
                for work in self._live if work.waiting}

    async def _attempts(self, job: Job) -> None:
        for attempt in range(RETRIES + 1):
            try:
                await jobs.execute(job)
                return
            except SimulatedCrash:
                self.crashed.append(job)
                return
            except jobs.PermanentFailure as exc:
                log.warning("reactorflow.testing.permanent_failure job=%s: %s", job, exc)
                return
            except Exception as exc:
                if attempt < RETRIES:
                    log.warning("reactorflow.testing.job_retry job=%s error=%r", job, exc)
                    continue
                log.exception("reactorflow.testing.job_gave_up job=%s", job)
                await jobs.give_up(job, f"the job failed {attempt + 1} time(s): "
                                        f"{type(exc).__name__}: {exc}")

    async def idle(self) -> None:
        """Wait until every running job waits for the fake clock, or none is running (delayed
        jobs not yet due do not count)."""
        while True:
            await anyio.lowlevel.checkpoint()  # a finishing job may enqueue the next one
            if not self._busy():
                return
            self._changed.clear()
            await self._changed.wait()

    async def drain(self, limit: int) -> None:
        """Run jobs until none is running.

        Raises:
            DrainError: past `limit` jobs started.
            DrainStuck: the jobs still running all wait for the fake clock (for `STUCK_GRACE`
                real seconds, no job beginning or ending meanwhile).
        """
        first = self.started
        while True:
            await anyio.lowlevel.checkpoint()  # a finishing job may enqueue the next one
            if not self._running:
                return
            if self.started - first > limit:
                raise DrainError(limit, self.history)
            if not self._busy():
                await self._stuck_or_moving()
                continue
            self._changed.clear()
            await self._changed.wait()

    async def _stuck_or_moving(self) -> None:
        """Every running job waits for the fake clock: return once one works again or a job
        begins or ends; raise DrainStuck if that does not happen within `STUCK_GRACE`."""
        moves = self._moves
        give_up = time.monotonic() + STUCK_GRACE  # real time: the fake one stands still
        while self._moves == moves and not self._busy():
            if time.monotonic() >= give_up:
                raise DrainStuck(self.waiting(), self._clock.now())
            await asyncio.sleep(STUCK_SAMPLE)

    async def aclose(self) -> None:
        """Cancel every job still running or waiting."""
        self._unwatch()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
