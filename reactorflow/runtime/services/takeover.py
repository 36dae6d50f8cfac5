"""The take-over watch: a run whose holder died goes on within about `lock_ttl`, not at the
next `stall_timeout` sweep.

A process that dies holding a run's liveness lock (SIGKILL, out of memory, a lost host) stops
extending it; the lock lapses at most `lock_ttl` seconds later, and the run's record still says
its lock was taken and never released (`Liveness.lapsed`). Its job is unacknowledged in the dead
worker: a broker redelivers it late (Dramatiq's Redis broker after its heartbeat timeout, 60 s
by default, and only at a random maintenance pass). So every worker process runs this watch,
on an event loop of its own in a daemon thread (a `LoopThread`), started and stopped with its
Dramatiq worker.
Every `period()` seconds (`lock_ttl / 3`, as often as the lock keeper extends a lock):

1. **One watcher per tick.** The process takes (or extends) the watch's own lock
   (`WATCH_LOCK`, TTL two periods) with the storage's lock primitives; a process that does not
   get it skips the tick, so the live runs are read once per period whatever the number of
   workers. A dead watcher's lock lapses within two periods and another process takes the
   watch over.
2. **Lapsed runs are handed on.** The watcher reads the liveness of the running and
   rolling-back runs (`sweeper.recover_lapsed`: up to `LIMIT`, from a random point when more
   are live) and hands every lapsed one to the workers, as a sweep does (enqueued; on a process
   without a shared queue, driven here). A worker takes it with the usual lock-then-load
   protocol, and the interrupted step runs again.
3. A run it handed on is not handed on again for `stall_timeout` seconds (its job is queued;
   should that job be lost, the sweep's `stall_timeout` rule finds the run).

So a crashed holder's run goes on at most about `lock_ttl + lock_ttl / 3` seconds after the
crash, plus a job's pick-up. An outage of the storage makes a tick fail and the loop go on
(logged, with a backoff as the timer firer's).
"""

from __future__ import annotations

import logging

from reactorflow import clock, config
from reactorflow.runtime.engine.ownership import new_owner
from reactorflow.runtime.services import sweeper
from reactorflow.runtime.services.loop_thread import LoopThread

log = logging.getLogger("reactorflow.takeover")

WATCH_LOCK = "reactorflow-takeover-watch"
"""The id of the lock whose holder is this tick's watcher (no run has this id: run ids are
generated, and the lock's record names no run)."""
LIMIT = sweeper.DEFAULT_LIMIT
"""Running and rolling-back runs the watcher looks at per tick."""
SHORTEST = 0.1
"""The shortest period (seconds), whatever `lock_ttl`."""
BACKOFF_CAP = 30.0


def period() -> float:
    """Seconds between two ticks: `lock_ttl / 3` (at least `SHORTEST`)."""
    return max(SHORTEST, config.settings().lock_ttl / 3)


class TakeoverWatch(LoopThread):
    """A process's take-over watch (see the module): `start` once, `stop` when the process's
    worker stops."""

    def __init__(self) -> None:
        super().__init__("reactorflow-takeover")
        self._owner = new_owner()
        self._handed: dict[str, float] = {}  # run id -> when this watch handed it on

    def start(self) -> None:
        """Start the watch in a daemon thread (once; a started one goes on)."""
        self._start()

    async def tick(self) -> list[str]:
        """One tick: the run ids handed on (none when another process watches this tick).

        Raises:
            StorageError: The storage failed (the tick is tried again later).
        """
        storage = config.current_storage()
        every = period()
        lease = 2 * every
        if not (await storage.extend_lock(WATCH_LOCK, self._owner, lease)
                or await storage.acquire_lock(WATCH_LOCK, self._owner, lease)):
            return []
        now = clock.now()
        stall = config.settings().stall_timeout
        self._handed = {r: t for r, t in self._handed.items() if now - t < stall}
        report = await sweeper.recover_lapsed(limit=LIMIT, skip=self._handed)
        handed = report.enqueued + report.recovered
        for run_id in handed:
            self._handed[run_id] = now
            log.info("reactorflow.takeover.handed_on run_id=%s: its lock lapsed (its holder "
                     "died)", run_id)
        return handed

    async def _run(self) -> None:
        backoff = 0.5
        while not self.stopping:
            try:
                await self.tick()
                wait = period()
                backoff = 0.5
            except Exception:
                log.warning("reactorflow.takeover.tick_failed (trying again in %.1fs)", backoff,
                            exc_info=True)
                wait, backoff = backoff, min(backoff * 2, BACKOFF_CAP)
            await self.nap(wait)


WATCH = TakeoverWatch()
"""This process's take-over watch."""
