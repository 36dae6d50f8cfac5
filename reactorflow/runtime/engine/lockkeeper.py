"""Keeps held run locks alive from a thread of its own.

A step that blocks the event loop (CPU work, a blocking call) must not let its run's lock lapse,
or the sweeper would start a duplicate. So extension does not run in the run's event loop: one
daemon thread per process, with its own event loop, extends every registered lock every ttl/3.
It starts with the first registration and is stopped at interpreter exit; a forked child (a
Celery prefork or gunicorn worker) forgets its parent's keeper and starts its own.

An extension refused because the owner released the lock meanwhile is not a loss: the owner
unregisters its hold before it releases the lock (`ownership.keep_alive`), and marks it
`releasing` before the final save that releases it in the same write (`RunWriter.save_state`);
only a refusal while the hold is registered and not releasing logs `reactorflow.lock.lost`.

Losing the lock stops the execution from starting anything new. A hold knows until when its
lock is surely held (`Hold.valid_until`: `LEASE` of the TTL after the last successful take or
extension was sent, measured on this process's monotonic clock, which runs on while the process
is suspended); every place an execution starts work (a step, an element, an element's attempt,
a rollback handler, a fanned-out map's dispatch) first calls `ensure_live`, which costs nothing
while that holds, and past it asks storage (an extension, fenced on the owner) before anything
starts. A refusal marks the hold `lost` (as the keeper does when its extension is refused) and
raises `LockLost`: nothing new starts, and every write that follows is refused by storage.

A hold may carry the gate places its execution holds (`Hold.gates`): they are renewed with the
run's lock (and the ordered-lock tickets stamped), as often as the shortest of their TTLs
needs, so a crashed holder's places lapse after their TTL and a live one's never do.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field

import anyio

from reactorflow.errors import LockLost
from reactorflow.runtime.gates.scope import GateHolds
from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.lock")
IDLE_WAKE = 1.0  # the keeper looks at its holds at least this often (seconds)
LEASE = 2 / 3
"""The share of a lock's TTL it is surely held for after its take or extension was sent (the
rest covers the time between sending the take and starting the hold, and clock drift)."""


@dataclass(slots=True, eq=False)
class Hold:
    storage: Storage
    run_id: str
    owner: str
    ttl: float
    due: float
    released: bool = False  # the owner's final save released the lock itself
    releasing: bool = False  # that final save is under way (it may have released it already)
    gates: GateHolds | None = None  # gate places renewed with the lock
    renewed: float = field(default_factory=time.monotonic)
    serial: int = field(default_factory=itertools.count().__next__)
    lost: bool = False  # an extension was refused: another execution may own the run now
    valid_until: float = 0.0  # monotonic time until which the lock is surely held (`LEASE`)

    def __post_init__(self) -> None:
        self.valid_until = self.renewed + self.ttl * LEASE

    def extended(self, sent: float) -> None:
        """An extension sent at `sent` (monotonic) succeeded: the lease runs from then."""
        self.valid_until = max(self.valid_until, sent + self.ttl * LEASE)

    def next_due(self) -> float:
        """When the lock, or the shortest-lived gate place it carries, needs renewing."""
        shortest = self.gates.shortest() if self.gates is not None else None
        return self.due if shortest is None else min(self.due, self.renewed + shortest / 3)


class LockKeeper:
    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._holds: dict[int, Hold] = {}
        self._thread: threading.Thread | None = None
        self._running = False  # its thread was started and has not ended
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._ready = threading.Event()
        self._stopping = False

    def hold(self, storage: Storage, run_id: str, owner: str, ttl: float) -> Hold:
        """Keep (run_id, owner)'s lock alive until `release`."""
        hold = Hold(storage, run_id, owner, ttl, time.monotonic() + ttl / 3)
        with self._mutex:
            self._holds[hold.serial] = hold
            started = self._ensure_thread()
        if not started and ttl / 3 < IDLE_WAKE:
            self._poke()  # due before the keeper's next regular wake-up
        return hold

    def attach(self, hold: Hold, gates: GateHolds) -> None:
        """Renew `gates`' places with `hold` from now on; a place that needs renewing sooner
        than the keeper's next wake-up wakes it."""
        hold.gates = gates
        gates.listener = self._nudge
        shortest = gates.shortest()
        if shortest is not None:  # places taken before the hold existed
            self._nudge(shortest)

    def _nudge(self, ttl: float) -> None:
        if ttl / 3 < IDLE_WAKE:
            self._poke()

    def release(self, hold: Hold) -> None:
        with self._mutex:
            self._holds.pop(hold.serial, None)

    def holds(self) -> list[Hold]:
        """The holds registered now (a snapshot), e.g. for a fake clock to extend them itself
        before it jumps."""
        with self._mutex:
            return list(self._holds.values())

    def held(self) -> int:
        with self._mutex:
            return len(self._holds)

    def _ensure_thread(self) -> bool:
        """Start the keeper thread if it is not running; True if it was started now."""
        if self._thread is not None and self._running:  # (`is_alive` takes a lock: per run)
            return False
        self._stopping = False
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name="reactorflow-lock-keeper",
                                        daemon=True)
        self._running = True
        self._thread.start()
        return True

    def _poke(self) -> None:
        self._ready.wait(5)
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            self._running = False

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._ready.set()
        storages: set[Storage] = set()
        try:
            while not self._stopping:
                now = time.monotonic()
                with self._mutex:
                    due = [h for h in self._holds.values() if h.next_due() <= now]
                    upcoming = min((h.next_due() for h in self._holds.values()),
                                   default=now + IDLE_WAKE)
                storages.update(hold.storage for hold in due)
                async with anyio.create_task_group() as tg:  # one slow extension delays none
                    for hold in due:
                        tg.start_soon(self._extend, hold)
                delay = max(0.0, min(upcoming - time.monotonic(), IDLE_WAKE))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                self._wake.clear()
        finally:
            for storage in storages:
                try:
                    await storage.aclose()
                except Exception:  # closing on the way out: nothing left to protect
                    log.debug("reactorflow.lock.keeper_close_failed", exc_info=True)

    async def _extend(self, hold: Hold) -> None:
        sent = time.monotonic()
        try:
            kept = await hold.storage.extend_lock(hold.run_id, hold.owner, hold.ttl)
        except Exception:
            log.warning("reactorflow.lock.extend_failed run_id=%s", hold.run_id, exc_info=True)
            hold.due = time.monotonic() + min(1.0, hold.ttl / 6)
            return
        if not kept:
            with self._mutex:
                let_go = hold.serial not in self._holds or hold.releasing or hold.released
            if let_go:  # its owner released it meanwhile: not a loss
                log.debug("reactorflow.lock.extend_after_release run_id=%s", hold.run_id)
            else:
                hold.lost = True  # the execution starts nothing more (`ensure_live`)
                log.warning("reactorflow.lock.lost run_id=%s owner=%s: the execution starts "
                            "nothing more", hold.run_id, hold.owner)
            self.release(hold)
            return
        hold.extended(sent)
        if hold.gates is not None:
            await self._renew_gates(hold.gates)
        hold.renewed = time.monotonic()
        hold.due = hold.renewed + hold.ttl / 3

    async def _renew_gates(self, gates: GateHolds) -> None:
        await renew_gates(gates)

    def forget_after_fork(self) -> None:
        """In a forked child: the keeper thread is the parent's (it does not run here), the
        holds are the parent's runs', and the mutex may have been held at the fork."""
        self._mutex = threading.Lock()
        self._holds = {}
        self._thread = None
        self._running = False
        self._loop = None
        self._wake = None
        self._ready = threading.Event()
        self._stopping = False

    def stop(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stopping = True
        self._poke()
        thread.join(timeout=5)
        self._thread = None


async def renew_gates(gates: GateHolds) -> None:
    """Renew gate places and stamp tickets (a failure is logged: the places lapse after their
    TTL)."""
    try:
        for key, holder, ttl in gates.places():
            if not await gates.storage.gate_extend(key, holder, ttl):
                log.warning("reactorflow.gate.lost run_id=%s key=%s", gates.run_id, key)
        for key, ticket in gates.tickets():
            if not await gates.storage.ordered_stamp(key, ticket):  # passed over: turn lost
                log.warning("reactorflow.gate.turn_lost run_id=%s key=%s", gates.run_id, key)
    except Exception:
        log.warning("reactorflow.gate.extend_failed run_id=%s", gates.run_id, exc_info=True)


def live_now(hold: Hold | None) -> bool:
    """Whether work may start for `hold` with no round trip: it holds no lock of its own, its
    lock was released (or is being released) by its final save, or its lease holds
    (`ensure_live` then returns at once; a per-step caller asks this first, without a
    coroutine)."""
    return (hold is None or hold.released or hold.releasing
            or (not hold.lost and time.monotonic() < hold.valid_until))


async def ensure_live(hold: Hold | None) -> None:
    """Before starting work for a hold's lock: return at once while its lease holds (no
    round trip); past it, extend the lock (fenced on the owner: refused when it expired or was
    taken over) and go on only if that succeeded.

    Args:
        hold: The execution's lock hold (None: it holds no lock of its own, nothing to check).

    Raises:
        LockLost: the lock was lost (the hold is marked `lost`): start nothing.
        StorageError: storage could not be asked (nothing may start either).
    """
    if live_now(hold):
        return
    assert hold is not None
    if hold.lost:
        raise LockLost(hold.run_id, hold.owner)
    sent = time.monotonic()
    if not await hold.storage.extend_lock(hold.run_id, hold.owner, hold.ttl):
        if hold.released or hold.releasing:
            return  # the final save released it meanwhile
        hold.lost = True
        log.warning("reactorflow.lock.lost run_id=%s owner=%s: found at a start of work; the "
                    "execution starts nothing more", hold.run_id, hold.owner)
        raise LockLost(hold.run_id, hold.owner)
    hold.extended(sent)


keeper = LockKeeper()
atexit.register(keeper.stop)
os.register_at_fork(after_in_child=keeper.forget_after_fork)
