"""Entering and leaving one gated scope: a run (its reactor's gates), or one step.

Entering takes the scope's gates in their declared order (`definition.gates.bind`: for a
reactor ordered lock, period, rate limit, lock, semaphore; for a step the rate limit comes last,
since a charge cannot be given back), then re-checks periods under the places taken. The first
busy gate stops it: what it took is given back (an ordered lock's place in line too, unless the
caller keeps its turn) and the entry says which gate was busy. A caller cancelled (or failing)
while it waits for a later gate gives back what it took the same way before the error goes on.

Who holds what (`GateHolds`, one per execution of a run):

* a lock's holder is the run id, so a run re-enters its own locks (a composed child or a step
  taking its reactor's lock proceeds); within one execution a lock is counted, and released to
  storage when its last user leaves. An element of an element reactor (`element`, e.g.
  `ship:3`) holds its locks as `<run id>:<element>`, so elements exclude each other, except a
  lock this execution holds as the run, which it re-enters. A fanned-out element's job
  (`borrows`) re-enters a lock its parked run keeps in storage (see `gates.parked`) the same
  way, borrowed: never released by the job;
* a semaphore's holder is `<run id>|<scope>`: not re-entrant;
* a rate limit is charged as `<run id>|<scope>`: once per run, whatever its resumes;
* an ordered lock's ticket is the run id for the run's own gate, `<run id>|<scope>` for a step.

Every place held is kept alive by the lock keeper with the run's liveness lock (see
`runtime.engine.lockkeeper`), so a crashed holder's places lapse after their TTL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio

from reactorflow import clock, config
from reactorflow.definition.gates import GateKind, Lock, OrderedLock, Period, RateLimit, Semaphore
from reactorflow.errors import GateBusy
from reactorflow.middleware import GateEvent, Hook, Hooks
from reactorflow.runtime.gates.gate_keys import period_marker
from reactorflow.runtime.gates.waiting import charge, take_place, take_turn
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import GateTake, RunCreation

log = logging.getLogger("reactorflow.gate")


@dataclass(frozen=True, slots=True)
class Need:
    """A gate with its key built for this run (or step)."""

    gate: Lock | Semaphore | RateLimit | Period | OrderedLock
    key: str

    @property
    def kind(self) -> GateKind:
        return self.gate.kind


class GateHolds:
    """The gate places one execution of a run holds (thread-safe: the keeper reads them)."""

    def __init__(self, storage: Storage, run_id: str, *, hooks: Hooks | None = None,
                 reactor: str = "") -> None:
        self.storage = storage
        self.run_id = run_id
        self.hooks = hooks
        self.reactor = reactor
        self._mutex = threading.Lock()
        self._locks: dict[tuple[str, str], int] = {}  # (lock key, holder) -> users in here
        self._places: dict[tuple[str, str], float] = {}  # (key, holder) -> ttl
        self._tickets: dict[tuple[str, str], float] = {}  # (key, ticket) -> poison timeout
        self._dropped: set[tuple[str, str]] = set()  # places a final save released already
        self.exclusive: dict[str, int] = {}  # keys held exclusively -> users (deadlock guard)
        self.listener: Callable[[float], None] | None = None  # told each new place's TTL
        self.kept: list[tuple[str, str, float]] = []  # places kept in storage (`keep`): ttl
        self.kept_tickets: list[tuple[str, str]] = []  # ... and turns
        self.borrows = False  # a fanned-out element's job: re-enters the parked run's locks

    def places(self) -> list[tuple[str, str, float]]:
        """The places held (and not yet dropped by a final save), with their TTLs."""
        with self._mutex:
            return [(k, h, ttl) for (k, h), ttl in self._places.items()
                    if (k, h) not in self._dropped]

    def places_to_release(self) -> list[tuple[str, str]]:
        """The places to drop with the execution's final save (its last write: it drives
        nothing more), so that their release costs no round trip of its own."""
        if not self._places:  # (the common case: a run holding no place, without the mutex)
            return []
        with self._mutex:
            return [pair for pair in self._places if pair not in self._dropped]

    def released_by_save(self, pairs: list[tuple[str, str]]) -> None:
        """The final save dropped these places: `leave` only does the bookkeeping."""
        if not pairs:
            return
        with self._mutex:
            self._dropped.update(pairs)

    def tickets(self) -> list[tuple[str, str]]:
        with self._mutex:
            return list(self._tickets)

    def shortest(self) -> float | None:
        """The shortest TTL or poison timeout held: what the keeper must renew before."""
        if not self._places and not self._tickets:  # (as above)
            return None
        with self._mutex:
            return min([*self._places.values(), *self._tickets.values()], default=None)

    def tell(self, action: str, need: Need, step: str | None, waited: float = 0.0) -> None:
        """Middleware `on_gate` hooks, and the log line of `action` (`waited`: seconds an
        acquisition waited)."""
        level = logging.INFO if action in ("busy", "snoozed") else logging.DEBUG
        if log.isEnabledFor(level):
            log.log(level, "reactorflow.gate.%s run_id=%s gate=%s key=%s step=%s", action,
                    self.run_id, need.kind.value, need.key, step or "-")
        if self.hooks:
            self.hooks.call(Hook.ON_GATE, GateEvent(self.run_id, self.reactor, step or "",
                                                 need.kind.value, need.key, action, waited))

    def holds_exclusively(self, key: str) -> bool:
        return self.exclusive.get(key, 0) > 0

    def _add(self, key: str, holder: str, ttl: float, exclusive: bool) -> None:
        with self._mutex:
            self._places[(key, holder)] = ttl
            if exclusive:
                self.exclusive[key] = self.exclusive.get(key, 0) + 1
        if self.listener is not None:
            self.listener(ttl)

    def _drop(self, key: str, holder: str, exclusive: bool) -> None:
        with self._mutex:
            self._places.pop((key, holder), None)
            if exclusive:
                left = self.exclusive.get(key, 0) - 1
                if left > 0:
                    self.exclusive[key] = left
                else:
                    self.exclusive.pop(key, None)

    def track_ticket(self, key: str, ticket: str, poison: float, held: bool) -> None:
        with self._mutex:
            if held:
                self._tickets[(key, ticket)] = poison
            else:
                self._tickets.pop((key, ticket), None)


@dataclass(slots=True)
class Entry:
    """What entering a scope did, and what leaving it must undo."""

    scope: str
    taken: list[tuple[Need, str]] = field(default_factory=list)  # places: (need, holder)
    tickets: list[tuple[Need, str]] = field(default_factory=list)
    periods: list[tuple[str, float]] = field(default_factory=list)  # markers to set on success
    busy: GateBusy | None = None
    period_done: Need | None = None  # a period already used: the scope must not run

    @property
    def admitted(self) -> bool:
        return self.busy is None and self.period_done is None


def holder_of(holds: GateHolds, need: Need, scope: str, element: str = "") -> str:
    if need.kind is GateKind.LOCK or (need.kind is GateKind.ORDERED_LOCK and not scope):
        if element and not holds._locks.get((need.key, holds.run_id)):
            return f"{holds.run_id}:{element}"
        return holds.run_id
    return f"{holds.run_id}|{scope}"


async def enter(holds: GateHolds, needs: Sequence[Need], scope: str, *, wait: bool,
                keep_turn: bool = False, charge_rate: bool = True, check_period: bool = True,
                step: str | None = None, element: str = "",
                creates: RunCreation | None = None, undoing: bool = False,
                queue_for: float = 0.0) -> Entry:
    """Take `needs` in order for `scope` ("" for the run itself, else a step key).

    Args:
        wait: wait up to each gate's `wait` (a caller); False never waits (a worker).
        undoing: for a rollback handler: with `wait`, wait for a lock or semaphore as long as
            its `ttl` allows (at least its `wait`): an undo is never lost to contention.
        queue_for: without `wait`, queue for a busy lock or semaphore this long (a worker's
            rollback handler, which parks the run: the release hands it the place).
        keep_turn: on a busy gate keep the ordered lock's place in line (a snoozing worker).
        charge_rate: charge rate limits (False when resuming: the run was charged already).
        check_period: check periods (False when resuming a run that already started).
        step: the step, for the error's fields.
        element: the map element whose element reactor enters (its locks' holder).
        creates: the run about to be stored (a start): when it must wait for the last gate,
            a lock or semaphore, and no period is to be re-checked after it, it queues with
            the run, which the release creates with the hand-over where storage can
            (`creates.stored` then says so; see `waiting.take_place`).
    """
    entry = Entry(scope)
    try:
        await _take_all(holds, needs, entry, wait=wait, charge_rate=charge_rate,
                        check_period=check_period, step=step, element=element,
                        folded=creates if creates is not None and _foldable(needs) else None,
                        undoing=undoing, queue_for=queue_for)
    except BaseException:  # cancelled (or failed) while waiting for a later gate
        with anyio.CancelScope(shield=True):
            try:
                await leave(holds, entry, completed=False, keep_turn=keep_turn)
            except Exception:  # the original error goes on; what is left lapses by its TTL
                log.exception("reactorflow.gate.give_back_failed run_id=%s", holds.run_id)
        raise
    if not entry.admitted:
        with anyio.CancelScope(shield=True):
            await leave(holds, entry, completed=False, keep_turn=keep_turn)
    return entry


async def _take_all(holds: GateHolds, needs: Sequence[Need], entry: Entry, *, wait: bool,
                    charge_rate: bool, check_period: bool, step: str | None, element: str,
                    folded: RunCreation | None, undoing: bool = False,
                    queue_for: float = 0.0) -> None:
    """`enter`'s taking for `entry.scope`, in order, recording in `entry` each place and turn
    as it is taken (so that whatever stops it midway, `leave` gives back exactly those)."""
    storage, scope = holds.storage, entry.scope
    for need in needs:
        gate = need.gate
        patience = _patience(gate, wait=wait, undoing=undoing)
        if holds.borrows and isinstance(gate, Lock):
            await _borrow(holds, need, gate)
        holder = holder_of(holds, need, scope, element)
        began = clock.now()
        if isinstance(gate, OrderedLock):
            entry.tickets.append((need, holder))
            holds.track_ticket(need.key, holder, gate.poison_pill_timeout, True)
            if not await take_turn(storage, need.key, holder,
                                   poison_pill_timeout=gate.poison_pill_timeout, wait=patience):
                entry.busy = _busy(holds, need, patience, step)
            else:
                holds.tell("acquired", need, step, clock.now() - began)
        elif isinstance(gate, Period):
            if not check_period:
                continue
            marker, ttl = period_marker(gate, need.key, clock.now())
            if await storage.period_marked(marker):
                entry.period_done = need
            else:
                entry.periods.append((marker, ttl))
        elif isinstance(gate, RateLimit):
            if not charge_rate:
                continue
            windows = [(seconds, limit) for _, seconds, limit in gate.windows]
            retry_after = await charge(storage, need.key, windows, holder, wait=patience)
            if retry_after is not None:
                entry.busy = _busy(holds, need, patience, step, retry_after)
            else:
                holds.tell("acquired", need, step, clock.now() - began)
        elif not await _take(holds, need, holder, patience,
                             folded if need is needs[-1] else None, queue_for=queue_for):
            entry.busy = _busy(holds, need, patience, step)
        else:
            entry.taken.append((need, holder))
            holds.tell("acquired", need, step, clock.now() - began)
        if not entry.admitted:
            break
    if entry.admitted and entry.taken:
        for marker, _ in entry.periods:  # re-checked under the places taken: at most once
            if await storage.period_marked(marker):
                entry.period_done = next(n for n in needs if n.kind is GateKind.PERIOD)
                break


def _patience(gate: Lock | Semaphore | RateLimit | Period | OrderedLock, *, wait: bool,
              undoing: bool) -> float:
    """How long `enter` waits for a gate: not at all (a worker), its `wait` (a caller), or, for
    a rollback handler's lock or semaphore, as long as its `ttl` allows (a crashed holder's
    place lapses by then; at least its `wait`)."""
    if not wait:
        return 0.0
    if undoing and isinstance(gate, Lock | Semaphore):
        return max(gate.wait, gate.ttl)
    return gate.wait


async def _borrow(holds: GateHolds, need: Need, gate: Lock) -> None:
    """In a fanned-out element's job (`holds.borrows`): a lock its parked run keeps (held as
    the run id, see `gates.parked`) is re-entered, as the run's own execution re-enters it for
    an inline element or a composed child. It is borrowed: counted as one user already, so
    leaving never releases it, and renewed while the job runs (for the park's bound plus its
    TTL, as `element_places` renews a parked map's places)."""
    with holds._mutex:
        if holds._locks.get((need.key, holds.run_id)):
            return
    if holds.run_id not in await holds.storage.gate_holders(need.key):
        return
    with holds._mutex:
        holds._locks[need.key, holds.run_id] = 1
    holds._add(need.key, holds.run_id, config.settings().async_wait_timeout + gate.ttl, False)


def _foldable(needs: Sequence[Need]) -> bool:
    """Whether a start may queue its run with its last gate: a lock or semaphore, with no
    period to re-check under the places once they are all taken."""
    return bool(needs) and needs[-1].kind in (GateKind.LOCK, GateKind.SEMAPHORE) and not any(
        need.kind is GateKind.PERIOD for need in needs)


async def _take(holds: GateHolds, need: Need, holder: str, patience: float,
                creates: RunCreation | None = None, *, queue_for: float = 0.0) -> bool:
    gate = need.gate
    assert isinstance(gate, Lock | Semaphore)
    if isinstance(gate, Lock):
        with holds._mutex:
            users = holds._locks.get((need.key, holder), 0)
            if users:
                holds._locks[need.key, holder] = users + 1
                return True
        limit = 1
    else:
        limit = gate.limit
    take = await take_place(holds.storage, need.key, holder, limit=limit, ttl=gate.ttl,
                            wait=patience, creates=creates, queue_for=queue_for)
    if take is GateTake.BUSY:
        return False
    if isinstance(gate, Lock):
        with holds._mutex:
            holds._locks[need.key, holder] = holds._locks.get((need.key, holder), 0) + 1
    holds._add(need.key, holder, gate.ttl, gate.exclusive)
    return True


async def leave(holds: GateHolds, entry: Entry, *, completed: bool,
                keep_turn: bool = False, step: str | None = None) -> None:
    """Give back what `entry` took (newest first); on success set its period markers; unless
    `keep_turn`, leave its ordered lines (the turn passes on)."""
    storage = holds.storage
    for need, holder in reversed(entry.taken):
        if not _let_go(holds, need, holder):
            continue  # a lock another user of this execution still holds (re-entered)
        with holds._mutex:
            dropped = (need.key, holder) in holds._dropped
            holds._dropped.discard((need.key, holder))
        if not dropped:
            await storage.gate_release(need.key, holder)
        holds.tell("released", need, step or (entry.scope or None))
    entry.taken.clear()
    if completed:
        for marker, ttl in entry.periods:
            await storage.mark_period(marker, ttl)
    if not keep_turn:
        for need, ticket in entry.tickets:
            holds.track_ticket(need.key, ticket, 0.0, False)
            await storage.ordered_leave(need.key, ticket)
            holds.tell("released", need, step or (entry.scope or None))
        entry.tickets.clear()


def _let_go(holds: GateHolds, need: Need, holder: str) -> bool:
    """This execution stops using a place; True when it was its last user (a lock re-entered
    within the execution is counted), and then the place is no longer renewed or counted by
    the deadlock guard."""
    if isinstance(need.gate, Lock):
        with holds._mutex:
            users = holds._locks.get((need.key, holder), 0) - 1
            if users > 0:
                holds._locks[need.key, holder] = users
                return False
            holds._locks.pop((need.key, holder), None)
    holds._drop(need.key, holder, need.gate.exclusive)
    return True


def keep(holds: GateHolds, entry: Entry) -> None:
    """The execution stops while `entry`'s places and turns stay taken in storage (a parked
    run's, or its parked map's: the execution that takes the run on next takes them again as
    their holder): forget them here, releasing nothing. They are remembered in `holds.kept`
    until `extend_kept` makes them last as long as the park."""
    for need, holder in entry.taken:
        gate = need.gate
        if _let_go(holds, need, holder) and isinstance(gate, Lock | Semaphore):
            holds.kept.append((need.key, holder, gate.ttl))
    for need, ticket in entry.tickets:
        holds.track_ticket(need.key, ticket, 0.0, False)
        holds.kept_tickets.append((need.key, ticket))
    entry.taken.clear()
    entry.tickets.clear()


async def extend_kept(holds: GateHolds, bound: float) -> None:
    """The places `keep` kept outlive the execution: each is extended to `bound` seconds (how
    long nobody may look at the run: its park) plus its own `ttl`, so a live run keeps it
    until whoever takes the run on next re-adopts it, and a crashed one's lapses that long
    after; each kept turn is stamped (its holder is alive)."""
    storage = holds.storage
    kept, holds.kept = holds.kept, []
    tickets, holds.kept_tickets = holds.kept_tickets, []
    for key, holder, ttl in kept:
        if not await storage.gate_extend(key, holder, bound + ttl):
            log.warning("reactorflow.gate.lost run_id=%s key=%s", holds.run_id, key)
    for key, ticket in tickets:
        if not await storage.ordered_stamp(key, ticket):  # passed over: its turn was lost
            log.warning("reactorflow.gate.turn_lost run_id=%s key=%s", holds.run_id, key)


def _busy(holds: GateHolds, need: Need, waited: float, step: str | None,
          retry_after: float | None = None) -> GateBusy:
    holds.tell("busy", need, step)
    return GateBusy(need.kind.value, need.key, waited=waited, retry_after=retry_after,
                    run_id=holds.run_id, step=step)
