"""`EnvironmentQueue`: the runtime's job queue inside a test `Environment`.

Jobs run as tasks on the test's own event loop (so a test sees their effects and their
failures), a delayed job waits on the environment's fake clock, and `drain()` waits until no job
is running or due. A job whose body raises an infrastructure error is tried again at once (at
most `RETRIES` times), then given up (`jobs.give_up`), as a worker would. A `SimulatedCrash`
ends the job like a killed worker: nothing more happens to it.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import anyio.lowlevel

from reactorflow.errors import ReactorflowError
from reactorflow.runtime import jobs
from reactorflow.runtime.queue import Job
from reactorflow.testing.clock import FakeClock
from reactorflow.testing.crash import SimulatedCrash

log = logging.getLogger("reactorflow.testing")

RETRIES = 3


class DrainError(ReactorflowError):
    """`Environment.drain()` ran more jobs than its bound: work keeps arriving."""

    def __init__(self, limit: int, recent: list[Job]) -> None:
        self.limit = limit
        self.recent = recent
        shown = ", ".join(f"{j.kind}:{j.reactor}:{j.run_id}{':' + j.step if j.step else ''}"
                          for j in recent[-5:])
        super().__init__(f"drain() ran {limit} jobs and work keeps arriving (last: {shown}); "
                         "a run re-enqueues itself without end, or raise the bound with "
                         "drain(limit=...)")


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
        self._changed = asyncio.Event()  # set whenever a job begins or ends
        self._thread = threading.get_ident()
        self.started = 0  # jobs started so far (drain bounds this)
        self.history: list[Job] = []  # every job enqueued, in order
        self.crashed: list[Job] = []  # jobs a SimulatedCrash ended

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
        self._idle.clear()
        self._changed.set()

    def _end(self) -> None:
        self._running -= 1
        if self._running == 0:
            self._idle.set()
        self._changed.set()

    async def _run(self, job: Job, delay: float) -> None:
        if delay > 0:
            await self._clock.sleep(delay)
            self._begin()
        self.started += 1
        try:
            await self._attempts(job)
        finally:
            self._end()

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
        """Wait until no job is running (delayed jobs not yet due do not count)."""
        while self._running:
            await self._idle.wait()
            await anyio.lowlevel.checkpoint()  # a finishing job may enqueue the next one

    async def drain(self, limit: int) -> None:
        """Run jobs until none is running; raises DrainError past `limit` jobs started."""
        first = self.started
        while True:
            await anyio.lowlevel.checkpoint()  # a finishing job may enqueue the next one
            if not self._running:
                return
            if self.started - first > limit:
                raise DrainError(limit, self.history)
            self._changed.clear()
            await self._changed.wait()

    async def aclose(self) -> None:
        """Cancel every job still running or waiting."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
