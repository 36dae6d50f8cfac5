"""Values the storage contract passes: records, results and the option checks.

Those built on every call of a hot path (`RunHead`, `StoredRun`, `ResumeCheck`) are frozen
msgspec Structs: a frozen dataclass's `__init__` costs about ten times as much."""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import msgspec

from reactorflow.errors import ConfigurationError
from reactorflow.status import TERMINAL, Status

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


class RunHead(msgspec.Struct, frozen=True):
    """A run without its steps: enough to check status, list and sweep."""

    run_id: str
    reactor: str
    status: str
    meta: bytes
    state: bytes
    created_at: float
    touched_at: float


@dataclass(frozen=True, slots=True)
class Resumption:
    """A status write `claim_and_lock` makes in the same atomic call as the claim and the lock,
    only if the run is still as the caller read it: status `previous_status`, state bytes
    `expected_state`, and no claim for any interrupt in `unclaimed`. Written as `save_state`
    by the new lock owner would (status, state, events appended)."""

    previous_status: str
    expected_state: bytes
    status: str
    state: bytes
    events: Sequence[bytes] = ()
    unclaimed: Sequence[str] = ()


class ResumeCheck(msgspec.Struct, frozen=True):
    """What `claim_and_lock` checks before it claims anything, and the status write it then
    makes itself (no head read by the caller first): the run exists, belongs to `reactor`, is
    `paused` or `running`, its meta contains `marker` (the bytes every meta of a run of the
    caller's definition contains: its graph is unchanged), and its state waits on the
    interrupt and has no deadline for it at or before `now`. Storage reads these two fields of
    the state (a msgpack map): `waiting_on` (a list of interrupt keys) and `deadlines` (key ->
    seconds since the epoch).

    With `resume`, once claimed and locked, a `paused` run whose other waiting interrupts are
    unclaimed is written `running` as a `Resumption` would write it: its state with `status`
    "running", `updated_at` `now` and the interrupt no longer in `waiting_on`, and `events`
    appended.

    With `refuse_ext`, the run's inputs (its meta's `inputs` value) must not be a MessagePack
    ext value of that type: a process holding no codec stores its payload clear, which it must
    not do for a run whose values are sealed (`protection.envelope.EXT_CODE`). A meta storage
    cannot read so (not laid out as `records.RunMeta`) is refused too: the caller decides from
    the head it is given back."""

    reactor: str
    marker: bytes
    now: float
    resume: bool = False
    events: Sequence[bytes] = ()
    refuse_ext: int | None = None

    def admits(self, head: RunHead, name: str) -> bool:
        """Whether the run as `head` shows it passes the check for interrupt `name`."""
        if (head.reactor != self.reactor or head.status not in ("paused", "running")
                or self.marker not in head.meta):
            return False
        refused = self.refuse_ext
        if refused is not None and inputs_are_ext(head.meta, refused) is not False:
            return False  # (sealed inputs, or a meta not read so: the caller decides)
        state = _state_map(head.state)
        if state is None or name not in _strings(state.get("waiting_on")):
            return False
        deadlines = state.get("deadlines")
        deadline = deadlines.get(name) if isinstance(deadlines, dict) else None
        return not isinstance(deadline, int | float) or self.now < deadline

    def resumption(self, head: RunHead, name: str) -> Resumption | None:
        """The status write the check makes once `name` is claimed and the run locked (for a
        run `head` shows as it `admits` it), or None when it makes none."""
        state = _state_map(head.state)
        if not self.resume or head.status != "paused" or state is None:
            return None
        others = [k for k in _strings(state.get("waiting_on")) if k != name]
        state.update(status="running", updated_at=self.now)
        if others:
            state["waiting_on"] = others
        else:
            state.pop("waiting_on", None)
        return Resumption("paused", head.state, "running", msgspec.msgpack.encode(state),
                          self.events, others)


class _MetaInputs(msgspec.Struct):
    inputs: msgspec.Raw


_META_INPUTS = msgspec.msgpack.Decoder(_MetaInputs)
_EXT_TYPE_AT = {0xC7: 2, 0xC8: 3, 0xC9: 5, 0xD4: 1, 0xD5: 1, 0xD6: 1, 0xD7: 1, 0xD8: 1}
"""A MessagePack ext value's lead byte -> the place of its type byte (ext 8/16/32, fixext)."""


def inputs_are_ext(meta: bytes, code: int) -> bool | None:
    """Whether a run meta's `inputs` value is a MessagePack ext value of type `code`; None when
    the meta does not decode as a run's meta."""
    try:
        inputs = bytes(_META_INPUTS.decode(meta).inputs)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    at = _EXT_TYPE_AT.get(inputs[0]) if inputs else None
    if at is None or len(inputs) <= at:
        return False
    return int.from_bytes(inputs[at:at + 1], "big", signed=True) == code


def _state_map(state: bytes) -> dict[str, Any] | None:
    try:
        found = msgspec.msgpack.decode(state)
    except msgspec.DecodeError:
        return None
    return found if isinstance(found, dict) else None


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


class StoredRun(msgspec.Struct, frozen=True):
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
    lapsed: bool = False
    """Its lock was taken and never released, and nobody holds it now: the lock lapsed, so
    its holder died (or stalled past the lock's TTL). A run released cleanly (handed to a
    worker, parked, settled) is not lapsed, however long it waits."""


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
    """A page of `list_runs`: the heads, the cursor of the next page, and the ids of the runs
    the page would hold whose record cannot be read (left out, never failing the page)."""

    heads: list[RunHead]
    next_cursor: str | None
    unreadable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SlotWrite:
    """What `save_elements` (or `settle_element`) did: how many outcomes it wrote, how many the
    map holds now, and (`settle_element` advancing a counter) the element index it claimed."""

    written: int
    stored: int
    following: int | None = None
    closed: bool = False  # `settle_element`: the run no longer goes forward (`CLOSES_MAPS`)
    claimed: int = 0  # `settle_element`: how many indexes from `following` it claimed


@dataclass(frozen=True, slots=True)
class Claim:
    """How `settle_element` claims from a map's dispatch counter within its window: at most
    `window` elements dispatched without an outcome, `total` elements in all, and a claim
    taken only once `want` indexes (a chunk; fewer at the map's end) fit the window, or when
    no element is out at all."""

    want: int
    window: int
    total: int


CLOSES_MAPS: frozenset[str] = frozenset({*TERMINAL, Status.ROLLING_BACK})
"""The run statuses that close its fanned-out maps: the run ended, or its rollback began (the
save of that status is the marker, so no path that stops a run can leave a map open). An
element not started yet never starts in a closed map (`start_element`), and a settled one
claims no successor (`settle_element`)."""


@dataclass(frozen=True, slots=True)
class ElementStart:
    """What `start_element` did: the slots it read (as `load_element_ranges`), and whether the
    element was refused (its map closed or stopped before it ever started: not marked, its body
    must not run) rather than started (marked by this call, or by an earlier one whose job was
    cut off: its body may run again)."""

    reads: list[list[bytes | None]]
    refused: bool


class RunKey(Enum):
    """A business key that leads to a run through a first-wins mapping (`find_by_key`)."""

    CORRELATION_ID = "correlation_id"  # an interrupt's correlation id (`map_correlation`)
    IDEMPOTENCY_KEY = "idempotency_key"  # a start's idempotency key (`claim_idempotency`)


class ClaimResult(Enum):
    ACCEPTED = "accepted"  # this call's payload is the interrupt's one payload
    TAKEN = "taken"  # another payload was claimed first; nothing written
    NOT_RESUMABLE = "not_resumable"  # run missing, or not paused/running, or cancel requested
    REFUSED = "refused"  # `claim_and_lock`'s `check` failed: nothing written (see `ResumeCheck`)


class GateTake(Enum):
    """What `gate_acquire` did."""

    ACQUIRED = "acquired"  # the holder took a free place
    HELD = "held"  # the holder already had a place (re-entry: its TTL reset, nothing counted)
    BUSY = "busy"  # every place is taken by others; nothing changed
    CREATED = "created"  # a release handed the holder the place and created its run (`RunCreation`)


@dataclass(slots=True)
class RunCreation:
    """A run to create when a gate is handed over: what `Storage.create_run` takes, queued
    with a waiter (`gate_acquire(creates=...)`), so that the release that hands the waiter the
    place creates its run in the same atomic step where the backend can (see `gate_acquire`).

    `stored` is the runtime's own note (storage never reads or sets it): True once the waiter
    learnt that a hand-over created the run (`GateTake.CREATED`, or its notification)."""

    run_id: str
    reactor: str
    status: str
    meta: bytes
    state: bytes
    created_at: float
    owner: str
    lock_ttl: float
    events: Sequence[bytes] = ()
    idempotency_key: str | None = None
    stored: bool = False


@dataclass(frozen=True, slots=True)
class OrderedLine:
    """An ordered lock's line as `rf.ordered_peek` sees it.

    Attributes:
        key: The ordered lock's key (as its template rendered it).
        turn: The ticket whose turn it is (a run id, or `<run id>|<step>` for a step's ordered
            lock); None when the line is empty.
        turn_stamp: When the turn's holder last showed progress (seconds since the epoch, the
            storage's clock); None when the line is empty. A holder quiet for longer than the
            lock's `poison_pill_timeout` is passed over by the next ticket that asks.
        waiting: How many tickets wait behind the turn.
        ahead: Asked for one ticket (`Storage.ordered_peek(key, ticket)`): how many unfinished
            places are before it (0: it has the turn); None when it is not in line, or when
            no ticket was asked about.
    """

    key: str
    turn: str | None = None
    turn_stamp: float | None = None
    waiting: int = 0
    ahead: int | None = None


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """A schedule's stored state (see `storage/contract/schedules.py`).

    Attributes:
        cursor: The last tick handled (ms since the epoch): ticks after it are due.
        paused: Whether the schedule is paused.
        last_run: The id of the last run a tick started ("" none yet).
        error: The last tick's problem (inputs refused, ...), "" when the last tick started.
        pending: The ticks claimed and not yet finished (their run not yet started and
            recorded), oldest first, each as `(tick ms, lease expiry ms)`: a tick whose lease
            expired was claimed by a scheduler that died before finishing it.
    """

    cursor: int
    paused: bool = False
    last_run: str = ""
    error: str = ""
    pending: tuple[tuple[int, int], ...] = ()


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


@dataclass(frozen=True, slots=True)
class DueTimer:
    """A timer a firer claimed (see `storage/contract/timers.py`).

    Attributes:
        run_id: The run to look at.
        reactor: Its reactor's name.
        due: When it fell due (as armed; Unix time).
        leased_until: The time the claim set on it: the firer's disarm names it.
        version: The version of its reactor the run was on when it armed the timer.
    """

    run_id: str
    reactor: str
    due: float
    leased_until: float
    version: int = 1
