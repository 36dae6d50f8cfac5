"""The storage contract every backend implements (and one contract test suite checks).

Backends store opaque bytes (the runtime encodes every record with msgspec). The contract is
written so that Redis can implement each method atomically in one round trip:

* **Runs** are split in parts so that checkpointing step N never rewrites steps 1..N-1: a head
  (reactor, status, `meta` written once, `state` written on status changes, `touched_at`), one
  record per step, and a bounded history list.
* **Fencing**: every write to a run after its creation names the writer's lock `owner` and is
  refused with `LockLost` (writing nothing) unless that owner holds the run's liveness lock.
* **Liveness lock**: re-entrant (owner + count) with a TTL; the holder extends it.
* **First-wins primitives**: interrupt claims, correlation ids, idempotency keys.
* **Notification**: `publish` is called after the durable write it announces; waiters subscribe
  first, then read, then wait with a fallback re-check (pub/sub is an optimisation).
* **Findable runs**: once `create_run` (or a status write: `save_state`, `claim_and_lock`)
  has returned *or raised*, the run as stored is findable by the sweeper: by `scan_status`
  (its index entry was written with the run), or else by `scan_records` (the write left a
  repair record in the run's own keys, or the pass finds the run from its record), which
  writes its index entries again. A backend whose index writes can be cut off from the run's
  write (Redis Cluster: other slots) must leave that repair record atomically with the run;
  `repair_index` redoes the entries of one run (an idempotent replay calls it). The same holds
  for an async unit's dispatch (`save_step(unit=True)`): once it returned or raised, a unit
  whose record was written is found by `scan_units`, or by it after `scan_records` wrote its
  unit index entry again. A write that is refused (`LockLost`) touches no index entry.

**Retention** (api.md §13: it never drops live work) applies to *ended* runs only
(`reactorflow.status.ENDED`: completed, failed, halted, cancelled). A run in any other status
(running, also through one step longer than the retention; paused; rolling_back; aborted, its
undo still owed; snoozing at a gate or queued behind an ordered lock) never expires, nor does
anything it owns: its head, steps, history, claims, counters, control request, map element
slots, correlation ids and idempotency claim (`claim_idempotency`), nor its ticket in an
ordered lock's line, however long it waits. The write that stores an ended status
(`create_run`, `save_state`, `claim_and_lock`'s status write, a gate's hand-over) starts the
retention of every part of the run: they expire `retention` seconds after it (element slots
take the run's expiry at their writes and in that same atomic write; correlation ids are
released when the run ends; its idempotency claim takes the run's expiry, see
`claim_idempotency`). A later write that stores a live status again (a retry, an undo) makes
them permanent again. Writes that store no status (`save_step`, `claim`, `request_control`,
`incr_counter`, `save_unit`, element writes) neither start nor extend a retention; what they
create takes the run's. The liveness lock keeps its own TTL. Index entries of an expired run
are hints that readers drop (`list_runs`, `scan_status` prune them, bounded per call).
Thread safety: one storage object may be used from several threads and event loops at once.

The contract is one class, `Storage`, written in parts: runs, locks, claims, indexes and
notification here; map element slots in `contract_maps.py`, gates in `contract_gates.py` and
schedules in `contract_schedules.py`; the values they pass in `values.py`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager

from reactorflow.storage.contract.gates import GatesContract
from reactorflow.storage.contract.maps import LOAD_LIMIT, MAX_ELEMENTS, MapSlotsContract
from reactorflow.storage.contract.schedules import SchedulesContract
from reactorflow.storage.contract.values import (
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_RETENTION,
    ClaimResult,
    ElementStart,
    GateTake,
    Liveness,
    OrderedLine,
    ResumeCheck,
    Resumption,
    RunCreation,
    RunHead,
    RunPageData,
    ScheduleState,
    SlotWrite,
    StoredRun,
    Subscription,
    UnitLiveness,
    check_count,
    check_seconds,
)

__all__ = [
    "DEFAULT_HISTORY_LIMIT", "DEFAULT_RETENTION", "LOAD_LIMIT", "MAX_ELEMENTS", "ClaimResult",
    "ElementStart", "GateTake", "Liveness",
    "OrderedLine", "ResumeCheck", "Resumption", "RunCreation", "RunHead", "RunPageData",
    "ScheduleState", "SlotWrite", "Storage", "StoredRun", "Subscription", "UnitLiveness",
    "check_count", "check_seconds",
]


class Storage(MapSlotsContract, GatesContract, SchedulesContract, abc.ABC):
    """Abstract storage backend. Methods state their atomicity; all are safe to retry unless
    noted (a retried write is idempotent because it writes the same bytes)."""

    retention: float = DEFAULT_RETENTION
    history_limit: int = DEFAULT_HISTORY_LIMIT

    def __init__(self, *, retention: float = DEFAULT_RETENTION,
                 history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        """Validate and keep the options every backend shares.

        Args:
            retention: seconds an ended run is kept after the write that ended it (finite,
                > 0); a run that has not ended is never dropped (see the module docstring).
            history_limit: events kept per run, the newest (a whole number >= 1).

        Raises:
            ConfigurationError: a value out of range; the message names the parameter.
        """
        backend = type(self).__name__
        self.retention = check_seconds(backend, "retention", retention)
        self.history_limit = check_count(backend, "history_limit", history_limit)

    # -- runs ----------------------------------------------------------------------------------

    @abc.abstractmethod
    async def create_run(
        self,
        run_id: str,
        *,
        reactor: str,
        status: str,
        meta: bytes,
        state: bytes,
        created_at: float,
        owner: str,
        lock_ttl: float,
        events: Sequence[bytes] = (),
        idempotency_key: str | None = None,
    ) -> bool:
        """Atomically create the run and take its liveness lock for `owner` (count 1).

        Returns False and writes nothing when the run id already exists, or when another owner
        holds the run's lock (a start takes its run's lock before it claims an idempotency key:
        whoever takes over a claim whose claimer died takes that lock first, so a claimer that
        comes back late can no longer create its run). A retry of a call that did create the run
        still returns True; a lock `owner` already holds is taken over (count 1). Adds the run
        to the reactor's index and its status index; a call that raises after storing the run
        leaves it findable all the same (see "Findable runs" above).

        Args:
            run_id: The run's id.
            reactor: The reactor's name.
            status: The run's first status.
            meta: The encoded run metadata, written once.
            state: The encoded run state.
            created_at: Creation time, seconds since the epoch (orders the indexes).
            owner: The lock owner that creates the run and holds its lock.
            lock_ttl: The lock's time to live, in seconds.
            events: Encoded history events to store with it.
            idempotency_key: The idempotency key of `reactor` this run's start claimed
                (`claim_idempotency`): from now on the claim lives as long as the run (see
                `claim_idempotency`).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def load_run(self, run_id: str, *, history: bool = False,
                       claims: bool = False) -> StoredRun | None:
        """The run's head and every step record, with its history and claims when asked for,
        read atomically (one snapshot, one round trip).

        Args:
            run_id: The run's id.
            history: Read the run's history too.
            claims: Read the run's interrupt claims too.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def load_head(self, run_id: str) -> RunHead | None:
        """The run's head without its steps.

        Args:
            run_id: The run's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def save_step(
        self, run_id: str, owner: str, key: str, record: bytes, events: Sequence[bytes] = (),
        *, unit: bool = False,
    ) -> bytes | None:
        """Fenced checkpoint of one step: write its record, append events, touch the run.

        Atomic; refused with `LockLost` (nothing written) unless `owner` holds the lock. Costs
        the same whatever the number of steps already stored. Returns the pending control
        request (see `request_control`), if any. `unit=True` marks the dispatch of an async
        unit: (run, key) also enters the unit index read by `scan_units` (an index entry is a
        hint, removed by `save_unit`); findable as the module says, even when the index write
        is cut off (a repair record that `scan_records` finds).

        Args:
            run_id: The run's id.
            owner: The lock owner making the write (fenced: it must hold the run's lock).
            key: The step's key (dotted inside a composed child).
            record: The encoded step record.
            events: Encoded history events to append.
            unit: This write dispatches an async unit: also enter it in the unit index.

        Raises:
            LockLost: `owner` does not hold the run's lock (nothing was written).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def load_step(self, run_id: str, key: str) -> bytes | None:
        """One step record of a run (None when the run or the record does not exist).

        Args:
            run_id: The run's id.
            key: The step's key (dotted inside a composed child).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def save_state(
        self,
        run_id: str,
        owner: str,
        *,
        status: str,
        previous_status: str,
        state: bytes,
        steps: Mapping[str, bytes] | None = None,
        events: Sequence[bytes] = (),
        clear_control: bool = False,
        publish: bool = False,
        release: bool = False,
        gates: Sequence[tuple[str, str]] = (),
        unless_control: bool = False,
    ) -> bytes | None:
        """Fenced write of the run's status and state, with any step records that change with
        it; atomic like `save_step`. With `release`, the same atomic write then leaves the run's
        lock once (as `release_lock`): the owner's final save and its release in one. Moves the
        run between status indexes (index entries are hints that readers verify against the
        record). With `clear_control` the pending control request is removed; with `publish`,
        the run's completion channel is notified after the write. `gates` lists (gate key,
        holder) pairs to drop, each as `gate_release` does, in the same round trip and before
        the write (whoever sees the new state finds them free; not atomic with the write: a
        refused write may still have dropped them). Returns the pending control request (None
        when cleared). With `unless_control`, a pending control request refuses the write:
        nothing is written (nor released, published or moved between indexes, but for index
        hints a Redis Cluster may have added), and the request is returned; so there, a returned
        request means nothing was written. With `unless_control` the `gates` are dropped only
        once the write landed, after it (on one Redis node in the same round trip, each release
        guarded by the status written), so a refused write drops none.

        Args:
            run_id: The run's id.
            owner: The lock owner making the write (fenced: it must hold the run's lock).
            status: The new status.
            previous_status: The status the writer read (moves the run between status indexes).
            state: The encoded run state.
            steps: Step records (key -> record) written with it.
            events: Encoded history events to append.
            clear_control: Remove the pending control request.
            publish: Notify the run's completion channel after the write.
            release: Leave the run's lock once in the same atomic write.
            gates: (gate key, holder) pairs to drop before the write.
            unless_control: Write nothing when a control request is pending (see above).

        Raises:
            LockLost: `owner` does not hold the run's lock (nothing was written).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def history(self, run_id: str) -> list[bytes]:
        """The run's events, oldest first (at most `history_limit`, the newest kept).

        Args:
            run_id: The run's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- liveness lock -------------------------------------------------------------------------
    # `run_id` names the lock: a run's own id for its liveness lock (the one fenced writes
    # check), or "<run id>:<step key>" for the lock of an async unit.

    @abc.abstractmethod
    async def acquire_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        """Take the run's lock, or re-enter it (count + 1) when `owner` already holds it.

        Sets the TTL to `ttl`. False, with nothing changed, when another owner holds it.

        Args:
            run_id: The lock's name: a run id, or `"<run id>:<step key>"` for an async unit's lock.
            owner: Who takes it.
            ttl: The lock's time to live, in seconds.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def extend_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        """Reset the TTL of a lock `owner` holds; False if it does not hold it (any more).

        Args:
            run_id: The lock's name (as for `acquire_lock`).
            owner: Who should hold it.
            ttl: The lock's time to live, in seconds.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def release_lock(self, run_id: str, owner: str) -> int:
        """Leave the lock once (count - 1, deleted at 0). Returns the count left, or -1 when
        `owner` did not hold it (nothing changed).

        Args:
            run_id: The lock's name (as for `acquire_lock`).
            owner: Who leaves it.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def lock_owner(self, run_id: str) -> str | None:
        """Who holds the run's lock now, if anyone.

        Args:
            run_id: The lock's name (as for `acquire_lock`).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- control requests ----------------------------------------------------------------------

    @abc.abstractmethod
    async def request_control(self, run_id: str, control: bytes) -> bool:
        """Store a request (cancel, fail) for the run's owning execution; first request wins.

        Unfenced: anyone may ask. False when a request is already pending or the run is gone.

        Args:
            run_id: The run's id.
            control: The encoded request.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- interrupts ----------------------------------------------------------------------------

    @abc.abstractmethod
    async def claim(self, run_id: str, name: str, payload: bytes) -> ClaimResult:
        """First-wins claim of interrupt `name`'s one payload.

        Atomic with a check that the run exists, is `paused` or `running`, and has no pending
        control request (see `request_control`). The checks run in this order: a missing run is
        NOT_RESUMABLE; an existing claim is TAKEN whatever the status; then the status and
        control checks. Claims are never deleted; they expire with the run.

        Args:
            run_id: The run's id.
            name: The interrupt's key.
            payload: The encoded payload.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    async def claim_and_lock(self, run_id: str, name: str, payload: bytes, *, owner: str,
                             lock_ttl: float, then: Resumption | None = None,
                             check: ResumeCheck | None = None,
                             ) -> tuple[ClaimResult, StoredRun | None]:
        """`check` (if given: else nothing is checked first), then `claim`, then, if it was
        accepted, `acquire_lock(run_id, owner, lock_ttl)`, then, if the lock was taken, the
        status write `then` (when the run is still as it describes; with `check`, the one the
        check makes), then `load_run(run_id, history=True, claims=True)`: what `continue_` does
        first, in one call. Redis does it all in one script (one round trip); this default makes
        the calls in turn.

        Args:
            run_id: The run's id.
            name: The interrupt's key.
            payload: The encoded payload.
            owner: Who takes the lock.
            lock_ttl: Seconds the lock lives unless extended.
            then: A status write to make under the new lock, only if the run's status, state
                and claims are still as it expects (see `Resumption`); else nothing is written
                and the caller sees the run as it is.
            check: What must hold before anything is claimed (see `ResumeCheck`; not with
                `then`). A retry of a call that claimed skips it (it answers as that call did).

        Returns:
            The claim's outcome, and the run as `load_run` reads it (after the status write,
            if it was made) when the claim was accepted and `owner` now holds the lock (None
            otherwise: another owner holds it, or the claim was not accepted, and then no lock
            was taken and nothing else written). `REFUSED` when `check` failed: nothing was
            written, and the run is returned with its head only (no steps; None when the run
            does not exist), for the caller to say why.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
        if check is not None:
            head = await self.load_head(run_id)
            if head is None or not check.admits(head, name):
                return ClaimResult.REFUSED, None if head is None else StoredRun(head, {})
            then = check.resumption(head, name)
        outcome = await self.claim(run_id, name, payload)
        if outcome is not ClaimResult.ACCEPTED or not await self.acquire_lock(run_id, owner,
                                                                               lock_ttl):
            return outcome, None
        stored = await self.load_run(run_id, history=True, claims=True)
        if (then is not None and stored is not None
                and stored.head.status == then.previous_status
                and stored.head.state == then.expected_state
                and not any(k in (stored.claims or {}) for k in then.unclaimed)):
            await self.save_state(run_id, owner, status=then.status,
                                  previous_status=then.previous_status, state=then.state,
                                  events=then.events)
            stored = await self.load_run(run_id, history=True, claims=True)
        return outcome, stored

    @abc.abstractmethod
    async def claims(self, run_id: str) -> dict[str, bytes]:
        """Every claim of the run (applied or not).

        Args:
            run_id: The run's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def incr_counter(self, run_id: str, name: str) -> int:
        """Atomically add one to the run's counter `name` and return the new value; 0 (nothing
        written) when the run does not exist.

        Args:
            run_id: The run's id.
            name: The counter's name.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def map_correlation(self, reactor: str, correlation_id: str, run_id: str) -> str:
        """Map a correlation id of `reactor` to a run, first wins (each reactor has its own
        correlation ids). Returns the run id it maps to (equal to `run_id` when this call won
        or the mapping already was this run's). The mapping never expires: it lives as long as
        its run may wait for a payload, and the run releases it when it ends
        (`release_correlation`).

        Args:
            reactor: The reactor's name.
            correlation_id: The correlation id.
            run_id: The run that asks for the id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def resolve_correlation(self, reactor: str, correlation_id: str) -> str | None:
        """The run a correlation id of `reactor` maps to.

        Args:
            reactor: The reactor's name.
            correlation_id: The correlation id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def release_correlation(self, reactor: str, correlation_id: str, run_id: str) -> bool:
        """Remove the mapping of a correlation id of `reactor` if it maps to `run_id` (atomic
        compare-and-delete); True if it did. A mapping to another run is left alone.

        Args:
            reactor: The reactor's name.
            correlation_id: The correlation id.
            run_id: The run the mapping must name to be removed.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def claim_idempotency(self, reactor: str, key: str, run_id: str) -> str:
        """First-wins claim of a run idempotency key; returns the run id that holds it.

        The claim lives as long as its run (api.md §13: a replay of the start, however late,
        finds the run while it lives, and never starts a duplicate): it has no expiry while the
        run is being stored and while the run lives (`create_run(idempotency_key=key)` links
        them), and expires `retention` seconds after the write that ends the run (a write that
        makes it live again removes that expiry), and with the run's record when that is
        dropped. Memory does it in the run's own writes. Redis keeps the claim in another slot
        than the run (another master on a cluster): the run's record names it, the write that
        ends the run (or makes it live again) leaves a follow-up record in the run's slot, and
        the claim takes the run's expiry right after that write (`follow_idempotency`), or in
        the sweeper's record pass (`scan_records`) when a crash cut the writer off between the
        two. A claim whose claimer died before storing its run has no run to follow: the next
        start with the same key takes it over (`release_idempotency`).

        Args:
            reactor: The reactor's name.
            key: The idempotency key.
            run_id: The run that asks for the key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def release_idempotency(self, reactor: str, key: str, run_id: str) -> bool:
        """Remove an idempotency claim if `run_id` holds it (atomic compare-and-delete); True
        if it did (a claim whose claimer died before storing its run is taken over this way).

        Args:
            reactor: The reactor's name.
            key: The idempotency key.
            run_id: The run the claim must name to be removed.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- listing and sweeping ------------------------------------------------------------------

    @abc.abstractmethod
    async def list_runs(
        self, reactor: str | None, status: str | None, limit: int, cursor: str | None
    ) -> RunPageData:
        """Runs of a reactor (of every reactor when `reactor` is None), newest first (by
        `created_at`, then run id), optionally of one status, from the indexes (never a
        keyspace scan). `cursor` is a `next_cursor` of an earlier call (None for the first
        page); pages neither repeat nor skip runs. Another string raises `ReactorflowError`.

        Args:
            reactor: Only this reactor's runs (`None`: every reactor's).
            status: Only runs of this status (`None`: any).
            limit: Runs per page.
            cursor: An earlier page's `next_cursor` (`None`: the first page).

        Raises:
            ReactorflowError: A cursor this backend did not return.
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def scan_units(self, limit: int) -> list[UnitLiveness]:
        """Dispatched async units not yet reported (from the unit index, oldest first), with
        the holder of each unit's lock ("<run id>:<key>"). One whose lock cannot be read is
        returned with `problem` set instead of failing the scan.

        Args:
            limit: The most units returned.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def scan_status(self, statuses: Sequence[str], limit: int) -> list[Liveness]:
        """At most `limit` runs of any reactor whose status is one of `statuses`, with lock and
        touch times, read from the status index (never a keyspace scan), in no promised
        order; when more match, from a random start (`rotation`), so that repeated calls see
        them all. A run whose record cannot be read (a field of the wrong type or value, an
        unknown status) is returned with `problem` set instead of failing the scan.

        Args:
            statuses: The statuses to look for.
            limit: The most runs returned.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def scan_records(self, limit: int) -> list[Liveness]:
        """The slow pass behind the indexes: read the next stretch, about `limit` run records,
        of a walk over every stored run (the records themselves, not the indexes), resumed where
        this storage object's last call stopped and started again once it went round. Each run
        that is running, rolling back or paused, or that carries a repair record (an index
        write of its that may have been cut off), gets its index entries written again
        (idempotent) and its repair record cleared. Returns the running, rolling-back and
        paused runs among them whose status index lacked them (as `scan_status` would have
        returned them), and those whose record cannot be read, with `problem` set. A backend
        whose index writes are atomic with the run finds none. A run (of any status) whose
        idempotency claim was left without the run's expiry by a writer cut off after its status
        write has its claim follow (see `claim_idempotency`).

        Args:
            limit: About the most run records read (a backend reads its batches whole).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def repair_index(self, run_id: str) -> bool:
        """Write the run's index entries again, as its record says (its status, its reactor;
        idempotent), and clear its repair record. True when its status entry was missing (the
        indexes did not lead to it); False when it was there, or the run does not exist.

        Args:
            run_id: The run's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def save_unit(self, run_id: str, key: str, record: bytes,
                        events: Sequence[bytes] = ()) -> bool:
        """Write the record of an async unit (an `async_step` run by a worker), drop it from the
        unit index, then publish the record on the run's `key` topic. Unfenced: a unit never
        holds the run's lock, and the run's owner never writes a unit's record after
        dispatching it.
        Returns False (nothing written) when the run no longer exists.

        Args:
            run_id: The run's id.
            key: The async unit's step key.
            record: The unit's encoded record.
            events: Encoded history events to append.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- notification --------------------------------------------------------------------------

    @abc.abstractmethod
    def subscribe(self, run_id: str, topic: str = "") -> AbstractAsyncContextManager[Subscription]:
        """Subscribe to a run's channel: its completion (topic "") or one unit's result (topic =
        the unit's step key). Subscribe first, then read the record, then wait.

        Args:
            run_id: The run's id.
            topic: `""` for the run's completion, or an async unit's step key for its result.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def publish(self, run_id: str, topic: str = "", message: bytes = b"1") -> None:
        """Notify a run's channel (after the durable write it announces).

        Args:
            run_id: The run's id.
            topic: As for `subscribe`.
            message: The message (the subscriber reads the record itself).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- lifecycle -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Release connections held for the current event loop."""

    def describe(self) -> str:
        """A short description for logs and errors (never credentials)."""
        return type(self).__name__
