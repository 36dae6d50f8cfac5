"""`InProcessQueue`: the runtime's job queue without a broker, in this process.

Jobs run as tasks on one event loop of the queue's own, in a daemon thread started on the first
enqueue (so a job never blocks the caller's loop, and a job that waits holds no thread). A
delayed job is scheduled on that loop. A job whose body raises an infrastructure error is tried
again after a back-off (`RETRY_BACKOFF` doubling, at most `RETRIES` times); then the queue gives
up on it (`jobs.give_up`: its run or unit fails). `PermanentFailure` is never retried. Jobs
still waiting when the process exits are lost, as with any in-process queue: storage is the
truth, and the sweeper recovers their runs.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from reactorflow.runtime.engine.job_queue import Job
from reactorflow.runtime.services import job_handling as jobs
from reactorflow.runtime.services.timers import FIRER

log = logging.getLogger("reactorflow.worker")

RETRIES = 3
RETRY_BACKOFF = 0.5  # seconds before the first retry (then doubled)


class InProcessQueue:
    """Jobs run on an event loop of the queue's own, in this process (see the module)."""

    shared = False

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def enqueue(self, job: Job, *, delay: float | None = None) -> None:
        """Run `job` on the queue's loop, `delay` seconds from now at the earliest.

        Args:
            job: what to do.
            delay: seconds to wait first (None: at once).
        """
        loop = self._running_loop()
        loop.call_soon_threadsafe(self._schedule, job, delay or 0.0)

    def timer_armed(self, due: float) -> None:
        """The timers of this process are fired by its firing loop: started on the first."""
        FIRER.start()
        FIRER.poke(due)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the queue's loop (jobs still running are cancelled) and join its thread."""
        with self._mutex:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)

    # -- on the queue's loop -------------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._mutex:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=self._serve, args=(loop,),
                                          name="reactorflow-queue", daemon=True)
                self._loop, self._thread = loop, thread
                thread.start()
            return self._loop

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                loop.run_until_complete(asyncio.gather(*self._tasks, return_exceptions=True))
        finally:
            loop.close()

    def _schedule(self, job: Job, delay: float, attempt: int = 0) -> None:
        loop = asyncio.get_running_loop()
        if delay > 0:
            loop.call_later(delay, self._start, job, attempt)
        else:
            self._start(job, attempt)

    def _start(self, job: Job, attempt: int) -> None:
        task = asyncio.get_running_loop().create_task(self._run(job, attempt))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, job: Job, attempt: int) -> None:
        try:
            await jobs.execute(job)
        except jobs.PermanentFailure as exc:
            log.warning("reactorflow.worker.permanent_failure job=%s: %s", job, exc)
        except Exception as exc:
            if attempt < RETRIES:
                delay = RETRY_BACKOFF * 2**attempt
                log.warning("reactorflow.worker.job_retry job=%s attempt=%d delay=%.1f error=%r",
                            job, attempt + 1, delay, exc)
                self._schedule(job, delay, attempt + 1)
                return
            log.exception("reactorflow.worker.job_gave_up job=%s", job)
            await jobs.give_up(job, f"the job failed {attempt + 1} time(s) on infrastructure "
                                    f"errors: {type(exc).__name__}: {exc}")
