"""Firing timers: whoever runs workers runs the timers (api.md §12).

A run that parks until a moment (a sleep's deadline, a long retry backoff, an interrupt's
deadline) arms its timer in storage (`Storage.arm_timer`, one per run: the earliest thing it
waits for) and holds nothing. Firing one, in order:

1. Claim what is due now (`Storage.claim_timers`): first wins, each claimed timer leased for
   `LEASE` seconds, so however many firers run, one gets it. Only the due timers are read.
2. Enqueue each run's resume durably (the job queue: a shared broker, the embedded worker, or
   the test kit's queue). The run's job acts only on what is due then (`parking.due`), so a
   resume enqueued twice writes once, and a timer is never early: a job that came before the
   deadline finds nothing due and writes nothing.
3. Disarm each claimed timer, compare-and-delete on its lease: a run that armed its timer again
   meanwhile (it woke and parked anew) keeps the new one. A firer that dies between 1 and 3
   leaves the timer leased; when the lease runs out it is due again and another firer takes it
   (late by the lease, never lost).

`Firer` is the firing loop of a process, on an event loop of its own in a daemon thread:
every `reactorflow worker` process runs one (started with its Dramatiq worker), and so does the
embedded default's process once a timer is armed in it. It looks again after `INTERVAL`
seconds at the latest, or at the earliest due time if that comes first; a timer armed in the
same process wakes it at once. An outage of the storage makes it back off and go on: what fell
due meanwhile fires late, once. `fire_timers()` fires what is due now in the calling task.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from reactorflow import clock, config
from reactorflow.definition import registry
from reactorflow.middleware import Hook, Hooks, TimerEvent
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.execution import hooks_for
from reactorflow.runtime.ops import operations
from reactorflow.runtime.services import job_handling as jobs
from reactorflow.runtime.services.loop_thread import LoopThread
from reactorflow.storage.contract.values import DueTimer

if TYPE_CHECKING:
    from reactorflow.snapshot import Run
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.timers")

LEASE = 30.0
"""Seconds a firer has from its claim to its disarm (then another firer may take the timer)."""
BATCH = 500
"""Timers claimed in one go..."""
BATCHES_PER_PASS = 20
"""...and claimed batches per firing pass at most (then disarmed, and the loop looks again)."""
INTERVAL = 1.0
"""Seconds between two looks of a firing loop at most (a timer armed by another process is
fired this late at worst)."""
BACKOFF_CAP = 30.0
"""Seconds a firing loop waits at most after a failed look (an outage), doubling from 0.5."""


async def fire_due(storage: Storage, *, limit: int = BATCH,
                   batches: int = BATCHES_PER_PASS) -> list[DueTimer]:
    """Claim the timers due now and enqueue each run's resume, a batch of `limit` at a time
    (at most `batches` of them), then disarm them all (see the module, steps 1-3): every due
    timer is claimed and its resume sent before the first disarm's round trip, so a second
    batch is not late by the first one's disarms. Returns the timers fired.

    Raises:
        StorageError: The storage failed (what was claimed and not disarmed fires again after
            its lease).
    """
    fired: list[DueTimer] = []
    for _ in range(batches):
        claimed = await storage.claim_timers(clock.now(), LEASE, limit)
        for timer in claimed:
            tell_fired(timer)
            queue.enqueue_run(timer.run_id, timer.reactor, version=timer.version)
        fired += claimed
        if len(claimed) < limit:
            break
    for timer in fired:
        await storage.disarm_timer(timer.run_id, timer.leased_until)
    if fired:
        log.debug("reactorflow.timers.fired count=%d", len(fired))
    return fired


async def fire_timers() -> list[Run]:
    """Fire every timer due now, in this task: each due run is resumed here (as a worker's job
    would resume it), and its snapshot returned. For scripts and tests; workers and the
    embedded default fire timers by themselves.

    Returns:
        The runs it resumed, as they are afterwards (in due order).

    Raises:
        StorageError: The storage failed (the timers not yet fired fire later).
    """
    storage = config.current_storage()
    resumed: list[Run] = []
    while True:
        claimed = await storage.claim_timers(clock.now(), LEASE, BATCH)
        for timer in claimed:
            tell_fired(timer)
            await jobs.execute_run(timer.run_id, timer.reactor, version=timer.version)
            await storage.disarm_timer(timer.run_id, timer.leased_until)
            reactor = registry.lookup(timer.reactor)
            if reactor is not None:
                resumed.append(await operations.get(reactor, timer.run_id))
        if len(claimed) < BATCH:
            return resumed


def tell_fired(timer: DueTimer) -> None:
    """The middleware `on_timer` hooks of a timer fired now (the configured middleware, then
    its reactor's own where it is declared here): how late it fired."""
    reactor = registry.lookup(timer.reactor)
    hooks = hooks_for(reactor) if reactor is not None else Hooks(config.settings().middleware)
    if hooks:
        hooks.call(Hook.ON_TIMER, TimerEvent(timer.run_id, timer.reactor, timer.due,
                                             max(clock.now(), timer.due)))


class Firer(LoopThread):
    """A process's firing loop (see the module): `start` once, `poke` when a timer is armed
    here, `stop` when the process's worker stops."""

    def __init__(self) -> None:
        super().__init__("reactorflow-timers")
        self._target = float("inf")  # when the loop looks next (Unix time)

    def start(self) -> None:
        """Start the loop in a daemon thread (once; a started one goes on)."""
        self._start()

    def poke(self, due: float) -> None:
        """A timer due at `due` was armed in this process: look then, if that is earlier than
        the loop's next look (safe from any thread)."""
        if not self.running or due >= self._target:
            return
        self._target = due
        self.wake()

    async def _run(self) -> None:
        backoff = 0.5
        while not self.stopping:
            try:
                storage = config.current_storage()
                fired = await fire_due(storage)
                if len(fired) >= BATCH * BATCHES_PER_PASS:
                    continue
                upcoming = await storage.next_timer()
                now = clock.now()
                wait = INTERVAL if upcoming is None else min(INTERVAL, max(0.0, upcoming - now))
                backoff = 0.5
            except Exception:
                log.warning("reactorflow.timers.fire_failed (trying again in %.1fs)", backoff,
                            exc_info=True)
                wait, backoff = backoff, min(backoff * 2, BACKOFF_CAP)
            self._target = clock.now() + wait
            await self.nap(wait)


FIRER = Firer()
"""This process's firing loop."""
