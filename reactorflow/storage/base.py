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

Every run key expires `retention` seconds after the run's last write — any write, fenced or not
(`claim`, `request_control`, `incr_counter` and `save_unit` count too; taking or extending the
lock does not). Thread safety: one storage object may be used from several threads and event
loops at once.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from enum import Enum

from reactorflow.errors import ConfigurationError

DEFAULT_RETENTION = 7 * 24 * 3600.0
DEFAULT_HISTORY_LIMIT = 1000


def check_seconds(backend: str, name: str, value: object) -> float:
    """`value` as a finite number of seconds > 0, or `ConfigurationError` naming `name`."""
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or value <= 0):
        raise ConfigurationError(
            f"{backend}({name}={value!r}): {name} must be a finite number of seconds > 0",
            option=name)
    return float(value)


def check_count(backend: str, name: str, value: object) -> int:
    """`value` as a whole number >= 1, or `ConfigurationError` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"{backend}({name}={value!r}): {name} must be a whole number >= 1", option=name)
    return value


@dataclass(frozen=True, slots=True)
class RunHead:
    """A run without its steps: enough to check status, list and sweep."""

    run_id: str
    reactor: str
    status: str
    meta: bytes
    state: bytes
    created_at: float
    touched_at: float


@dataclass(frozen=True, slots=True)
class StoredRun:
    head: RunHead
    steps: dict[str, bytes]
    history: list[bytes] | None = None  # when asked for
    claims: dict[str, bytes] | None = None  # when asked for


@dataclass(frozen=True, slots=True)
class Liveness:
    """What the sweeper needs to judge whether a run is stalled."""

    run_id: str
    reactor: str
    status: str
    touched_at: float
    lock_owner: str | None
    problem: str | None = None
    """Why the run's record could not be read (then only `run_id`, `reactor` and the status of
    the index it was found in are known): reported, never fatal to the whole scan."""


@dataclass(frozen=True, slots=True)
class UnitLiveness:
    """What the sweeper needs to judge whether a dispatched async unit was lost."""

    run_id: str
    key: str
    dispatched_at: float
    lock_owner: str | None
    problem: str | None = None
    """Why the unit's lock could not be read: reported, never fatal to the whole scan."""


@dataclass(frozen=True, slots=True)
class RunPageData:
    heads: list[RunHead]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class SlotWrite:
    """What `save_elements` did: how many outcomes it wrote, and how many the map holds now."""

    written: int
    stored: int


class ClaimResult(Enum):
    ACCEPTED = "accepted"  # this call's payload is the interrupt's one payload
    TAKEN = "taken"  # another payload was claimed first; nothing written
    NOT_RESUMABLE = "not_resumable"  # run missing, or not paused/running, or cancel requested


class GateTake(Enum):
    """What `gate_acquire` did."""

    ACQUIRED = "acquired"  # the holder took a free place
    HELD = "held"  # the holder already had a place (re-entry: its TTL reset, nothing counted)
    BUSY = "busy"  # every place is taken by others; nothing changed


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """A schedule's stored state (see the schedules section of `Storage`).

    Attributes:
        cursor: The last tick handled (ms since the epoch): ticks after it are due.
        paused: Whether the schedule is paused.
        last_run: The id of the last run a tick started ("" none yet).
        error: The last tick's problem (inputs refused, ...), "" when the last tick started.
    """

    cursor: int
    paused: bool = False
    last_run: str = ""
    error: str = ""


class Subscription(abc.ABC):
    """A live subscription to one run's completion channel."""

    message: bytes | None = None
    """The payload of the last notification `wait` returned for (a unit's channel carries the
    unit's record; a reader may use it instead of reading the record again)."""

    @abc.abstractmethod
    async def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a notification; True if one arrived. A notification
        that arrived since the subscription began, while nobody was waiting, is not lost: the
        next `wait` returns True at once. Several pending notifications may coalesce into one
        wake-up (waiters re-read the record after each)."""


class Storage(abc.ABC):
    """Abstract storage backend. Methods state their atomicity; all are safe to retry unless
    noted (a retried write is idempotent because it writes the same bytes)."""

    retention: float = DEFAULT_RETENTION
    history_limit: int = DEFAULT_HISTORY_LIMIT

    def __init__(self, *, retention: float = DEFAULT_RETENTION,
                 history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        """Validate and keep the options every backend shares.

        Args:
            retention: seconds a run is kept after its last write (finite, > 0).
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
    ) -> bool:
        """Atomically create the run and take its liveness lock for `owner` (count 1).

        Returns False and writes nothing when the run id already exists, or when another owner
        holds the run's lock (a start takes its run's lock before it claims an idempotency key:
        whoever takes over a claim whose claimer died takes that lock first, so a claimer that
        comes back late can no longer create its run). A retry of a call that did create the run
        still returns True; a lock `owner` already holds is taken over (count 1). Adds the run
        to the reactor's index.

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
        hint, removed by `save_unit`).

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
        when cleared).

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
        or the mapping already was this run's; then its retention starts again).

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
        order. A run whose record cannot be read (a field of the wrong type or value, an
        unknown status) is returned with `problem` set instead of failing the scan.

        Args:
            statuses: The statuses to look for.
            limit: The most runs returned.

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

    # -- map element slots ---------------------------------------------------------------------
    # A map step's element outcomes live beside the run, one slot per element index, never in
    # the run's step records: storing or reading an element costs the same whatever the map's
    # size, and elements run by workers write only their own slots (never the run).

    @abc.abstractmethod
    async def save_elements(self, run_id: str, key: str, outcomes: Mapping[int, bytes], *,
                            replace: bool = False) -> SlotWrite | None:
        """Store element outcomes of map `key` (element index -> record), all in one atomic
        call (one round trip however many are given; cost proportional to their number only).

        First wins per element: an index that already holds an outcome keeps it (a duplicate
        delivery, a re-run after a crash), unless `replace` (a rollback rewriting a completed
        element as undone). Unfenced: element jobs never hold the run's lock; safe to retry.
        Returns how many outcomes were written and how many the map now holds, or None (nothing
        written) when the run does not exist. Slots expire `retention` seconds after the map's
        last write (memory: with the run).

        Args:
            run_id: The run's id.
            key: The map step's key.
            outcomes: Element index -> encoded outcome.
            replace: Overwrite outcomes already stored (a rollback).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def load_elements(self, run_id: str, key: str, start: int,
                            count: int) -> list[bytes | None]:
        """The outcomes of elements `start` .. `start + count - 1` of map `key`, in index order
        (None for an element without one), in one round trip.

        Args:
            run_id: The run's id.
            key: The map step's key.
            start: The first element's index.
            count: How many elements.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    async def load_element_ranges(self, run_id: str,
                                  ranges: Sequence[tuple[str, int, int]]
                                  ) -> list[list[bytes | None]]:
        """Several `load_elements` reads of one run — (key, start, count) each — in one round
        trip where the backend can (the base class reads them one by one).

        Args:
            run_id: The run's id.
            ranges: `(map key, start, count)` for each read.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
        return [await self.load_elements(run_id, key, start, count)
                for key, start, count in ranges]

    @abc.abstractmethod
    async def count_elements(self, run_id: str, key: str) -> int:
        """How many elements of map `key` hold an outcome.

        Args:
            run_id: The run's id.
            key: The map step's key.

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

    # -- gates ---------------------------------------------------------------------------------
    # A gate key is any text a user's template produced. Each gate's keys are independent of
    # runs (they outlive none: every entry has a TTL) and share one slot per key on Redis.

    @abc.abstractmethod
    async def gate_acquire(self, key: str, holder: str, *, limit: int, ttl: float) -> GateTake:
        """Take one of the `limit` places of gate `key` for `holder`, for `ttl` seconds unless
        extended. Atomic: holders whose TTL ran out are dropped first; then a `holder` already
        in is HELD (its TTL reset); else ACQUIRED when fewer than `limit` hold it; else BUSY
        with nothing changed.

        Args:
            key: The gate's key.
            holder: Who takes the place (a run id, or a step's holder id).
            limit: The most holders at once.
            ttl: Seconds the place lives unless extended.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def gate_release(self, key: str, holder: str) -> bool:
        """Drop `holder` from gate `key` (atomic); True if it was there, and then the gate's
        channel is notified (see `subscribe_gate`). Releasing twice is harmless.

        Args:
            key: The gate's key.
            holder: Who leaves.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def gate_extend(self, key: str, holder: str, ttl: float) -> bool:
        """Reset `holder`'s TTL on gate `key`; False when it no longer holds it.

        Args:
            key: The gate's key.
            holder: Who holds it.
            ttl: The new time to live, in seconds.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def gate_holders(self, key: str) -> list[str]:
        """The live holders of gate `key` (any order).

        Args:
            key: The gate's key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    def subscribe_gate(self, key: str) -> AbstractAsyncContextManager[Subscription]:
        """Subscribe to gate `key`'s channel: notified when a place frees (a release, an
        ordered turn passed on). Subscribe first, then try, then wait.

        Args:
            key: The gate's key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def rate_charge(self, key: str, windows: Sequence[tuple[int, int]], charge: str,
                          ) -> float | None:
        """Charge one call to every fixed window `(seconds, limit)` of rate limit `key`, all or
        nothing, in one atomic step (the bucket of each window is `floor(now / seconds)`, now
        being the storage's clock). `charge` names the charge: a call with a charge already
        admitted is admitted again without counting (a run is charged once, whatever its
        resumes or redeliveries; the memory of a charge lasts twice the longest window, at least
        a day). Returns None when admitted, else the seconds until the first refusing window
        frees (nothing charged).

        Args:
            key: The rate limit's key.
            windows: `(seconds, limit)` for each window.
            charge: The charge's name (admitted once).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def period_marked(self, key: str) -> bool:
        """Whether period marker `key` (a gate key with its bucket) exists.

        Args:
            key: The marker's key (a gate key with its bucket).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def mark_period(self, key: str, ttl: float) -> bool:
        """Set period marker `key` for `ttl` seconds if absent (atomic); True if this call set
        it.

        Args:
            key: The marker's key (a gate key with its bucket).
            ttl: Seconds the marker lives.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_enter(self, key: str, ticket: str) -> int:
        """Take a place in ordered lock `key`'s line for `ticket` (a run id): the next number,
        stamped with the storage's clock. Atomic and idempotent: a ticket already in line keeps
        its number. Returns the number (1 for the first in an empty line).

        Args:
            key: The ordered lock's key.
            ticket: The run id taking a place.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_turn(self, key: str, ticket: str, poison_pill_timeout: float) -> bool | None:
        """Whether it is `ticket`'s turn in ordered lock `key` (atomic). Finished places are
        passed first; then, while the first unfinished place before `ticket` was stamped more
        than `poison_pill_timeout` seconds ago, it is passed over (a poison pill: its holder
        stopped making progress). True when `ticket` is first, False when an earlier place
        remains (either way asking renews `ticket`'s stamp: its holder is alive); None when
        `ticket` is not in line.

        Args:
            key: The ordered lock's key.
            ticket: The run id asking.
            poison_pill_timeout: Seconds without a stamp after which an earlier place is passed
                over.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_stamp(self, key: str, ticket: str) -> bool:
        """Renew `ticket`'s stamp (its holder is alive and making progress); False when it is
        not in line.

        Args:
            key: The ordered lock's key.
            ticket: The run id whose stamp is renewed.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_leave(self, key: str, ticket: str) -> bool:
        """Leave the line of ordered lock `key` (atomic): `ticket`'s place is finished and the
        turn passes on (the channel is notified); when every place is finished the line is
        deleted and numbering starts again. True if `ticket` was in line.

        Args:
            key: The ordered lock's key.
            ticket: The run id leaving.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- schedules -----------------------------------------------------------------------------
    # A schedule's key is "<reactor>:<schedule name or index>". Its record holds a cursor (the
    # last tick handled, in ms), a paused flag, the last run and the last error. Every
    # operation is atomic and touches that one record: constant work per tick, whatever the
    # number of runs stored.

    @abc.abstractmethod
    async def schedule_load(self, key: str, start: int | None) -> ScheduleState | None:
        """The schedule's state; when it has none, create it with cursor `start` (atomically:
        of two first loads, the first start wins) unless `start` is None (then: None).

        Args:
            key: The schedule's key.
            start: The cursor of a schedule seen for the first time (ms), or None to only read.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def schedule_advance(self, key: str, expected: int, cursor: int) -> bool:
        """Claim the ticks up to `cursor`: move the cursor from `expected` to `cursor` iff it is
        still `expected` and the schedule is not paused (atomic compare-and-set: of concurrent
        claims of one tick, exactly one wins). True if this call moved it.

        Args:
            key: The schedule's key.
            expected: The cursor the caller read.
            cursor: The tick claimed (ms).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def schedule_record(self, key: str, *, last_run: str = "", error: str = "") -> None:
        """Record what the last claimed tick did: the run it started (`last_run`, clearing the
        error) or its problem (`error`). Atomic; a missing schedule is left missing.

        Args:
            key: The schedule's key.
            last_run: The run started.
            error: Why no run started.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def schedule_pause(self, key: str, paused: bool, now: int) -> bool:
        """Pause or resume the schedule (created with cursor `now` if missing). Resuming moves
        the cursor to `now` when it is behind: ticks of the paused time never fire. Atomic;
        True if the flag changed.

        Args:
            key: The schedule's key.
            paused: Pause (True) or resume (False).
            now: The current time (ms).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- lifecycle -----------------------------------------------------------------------------

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections held for the current event loop."""

    def describe(self) -> str:
        """A short description for logs and errors (never credentials)."""
        return type(self).__name__


