"""Every record that crosses a boundary (storage, jobs), as msgspec structs.

Records are encoded with MessagePack. A run's meta record carries the schema version; a record
whose version this code does not know is refused (never guessed at).
"""

from __future__ import annotations

import traceback as tb
from datetime import datetime
from typing import Any

import msgspec

from reactorflow.protection.envelope import escape_text
from reactorflow.pydantic_types import enc_hook
from reactorflow.redaction import scrub
from reactorflow.status import (
    ControlKind,
    EventKind,
    HandlerKind,
    RollbackTrigger,
    Status,
    StepStatus,
)

SCHEMA_VERSION = 1
TRACEBACK_LIMIT = 8_000  # characters kept of a stored traceback
MESSAGE_LIMIT = 2_000


class RollbackFailure(msgspec.Struct, frozen=True):
    """An undo or compensate that raised during a rollback (the rollback went on).

    Attributes:
        step: The step's key.
        kind: The handler that raised: an `rf.HandlerKind` (`"undo"`, `"compensate"`, or
            `"undo_all"` for a map's bulk undo).
        message: The exception's message.
        type: The exception's class name.
    """

    step: str
    kind: HandlerKind
    message: str
    type: str = ""


class RunError(msgspec.Struct, frozen=True):
    """Why a run failed: the failing step and its exception, plus every rollback failure.

    `str(error)` is a one-line summary naming the step and the message, and the number of
    rollback failures if any.

    Attributes:
        step: The failing step's key, or `None`.
        type: The exception's class name.
        message: The exception's message.
        traceback: The traceback as text (capped).
        rollback_failures: Every `rf.RollbackFailure`.
    """

    step: str | None
    type: str
    message: str
    traceback: str = ""
    rollback_failures: list[RollbackFailure] = msgspec.field(default_factory=list)

    def __str__(self) -> str:
        """One line, naming the step and the message (a multi-line message joined with " / ")."""
        where = f"step {self.step!r}" if self.step else "the run"
        message = " / ".join(line.strip() for line in self.message.splitlines() if line.strip())
        summary = f"{where} failed: {self.type}: {message}"
        if self.rollback_failures:
            summary += f" ({len(self.rollback_failures)} rollback failure(s))"
        return summary


def describe(error: BaseException) -> str:
    """The message of `error` as recorded anywhere (records, events, logs, error messages),
    scrubbed of the secrets of the runs executing in this context (see reactorflow.redaction).

    Never raises: an exception whose `__str__` raises (or returns a non-str) is described by its
    type and what went wrong, so recording an error can never fail."""
    try:
        return escape_text(scrub(str(error)))  # (never read as a sealed text: see protection)
    except Exception as exc:
        return (f"<message unavailable: {type(error).__name__}.__str__ raised "
                f"{type(exc).__name__}>")


def summary(error: BaseException) -> str:
    """`"Type: message"` for an event detail or an error message (never raises)."""
    return f"{type(error).__name__}: {describe(error)}"


class ErrorRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """An exception as stored: class name, module, message and a capped traceback."""

    type: str
    message: str
    module: str = ""
    traceback: str = ""

    @classmethod
    def from_exception(cls, error: BaseException, *, with_traceback: bool = True) -> ErrorRecord:
        """The record of `error`, its message and traceback scrubbed (see `describe`); never
        raises."""
        text = ""
        if with_traceback and error.__traceback__ is not None:
            try:
                text = "".join(tb.format_exception(type(error), error, error.__traceback__))
            except Exception as exc:  # a broken __repr__/__str__ somewhere in the chain
                text = f"(traceback unavailable: formatting it raised {type(exc).__name__})"
            text = scrub(text)
            if len(text) > TRACEBACK_LIMIT:
                text = "... (truncated)\n" + text[-TRACEBACK_LIMIT:]
        message = describe(error)
        if len(message) > MESSAGE_LIMIT:
            message = message[:MESSAGE_LIMIT] + "... (truncated)"
        return cls(type(error).__name__, message, type(error).__module__, text)


class Event(msgspec.Struct, frozen=True, omit_defaults=True, array_like=True):
    """One entry of a run's history (stored as an array: append new fields at the end).

    Its kind is an `rf.EventKind`, a `StrEnum` (see it for every kind): `event.kind ==
    "run.started"` holds as `event.kind is rf.EventKind.RUN_STARTED` does. Stored as the plain
    string; read back, a kind this version does not know (written by a newer one) is kept as
    that string, so the history stays readable.

    Attributes:
        at: When (Unix time).
        kind: What happened: an `rf.EventKind` (an unknown stored kind: its string).
        step: The step's key, or `""` for run events.
        attempt: The attempt's number, where one applies.
        detail: Free text (an error summary, a child run id...).
        actor: Who did it, on the event an operator's action writes (continue, undo,
            cancel, retry, retry-step, skip-step, rewind, pause, resume, migrate): the
            `actor=` given in Python, the HTTP API token's name, or the CLI's `user@host`;
            `""` on the events the engine writes by itself (see reactorflow.audit).
    """

    at: float
    kind: str  # an EventKind (a str: a stored kind this version does not know is kept as is)
    step: str = ""
    attempt: int = 0
    detail: str = ""
    actor: str = ""  # (appended: older events read back with "", older code ignores it)


NIL = msgspec.Raw(b"\xc0")
"""MessagePack nil: the default of a Raw field. It is also how a `None` value encodes, so a Raw
field equal to NIL never means "absent": presence is always told by a status or a flag."""


class StepRecord(msgspec.Struct, omit_defaults=True, array_like=True):
    """One step's checkpoint. Written on its own, so step N never rewrites steps 1..N-1.

    Stored as an array (compact): new fields go at the end, with defaults.
    """

    status: StepStatus
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    result: msgspec.Raw = NIL  # the encoded result (meaningful only once `completed`)
    error: ErrorRecord | None = None
    seq: int = 0  # completion order within the run (undo runs in reverse)
    compensate_pending: bool = False  # its body failed and its compensate has not returned
    rollback_error: ErrorRecord | None = None
    child_inputs: msgspec.Raw = NIL  # compose: the child's validated inputs (see child_opened)
    deadline: float | None = None  # interrupt: when its timeout passes
    correlation_id: str | None = None  # interrupt: the resolved correlation id
    child_run: str | None = None  # async_reactor: the id of the child run it started
    retry_at: float | None = None  # parked between attempts (in a worker): the next one's time
    child_opened: bool = False  # compose: the child's inputs were mapped and its level opened
    wake_at: float | None = None  # sleep: its deadline (Unix time), checkpointed when it began

    @property
    def child_started(self) -> bool:
        """A compose step whose child level was opened (its steps may have run). Told by the
        flag, never by `child_inputs`: a child without inputs stores nil there. (A record
        written before the flag existed has non-nil inputs when its child was opened.)"""
        return self.child_opened or self.child_inputs != NIL


class ElementRecord(msgspec.Struct, omit_defaults=True, array_like=True):
    """The outcome of one element of a map step, in the map's own slots (never in the run's
    step records). Status: completed, failed (its compensate, if any, already ran: `rollback_error`
    says if it raised), skipped (never started: an atomic map stopped first), undone."""

    status: StepStatus
    attempts: int = 0
    result: msgspec.Raw = NIL  # the encoded result, once completed
    error: ErrorRecord | None = None
    rollback_error: ErrorRecord | None = None  # its undo (completed) or compensate (failed) raised
    # an element reactor's element (runtime.maps.children), kept while its rollback may need
    # them: the child's validated inputs and its step records (keyed as in the child's plan),
    # and the element slots of the maps nested in it (map key -> index -> encoded outcome)
    inputs: msgspec.Raw = NIL
    steps: dict[str, StepRecord] = {}
    maps: dict[str, dict[int, bytes]] = {}


class ElementArgs(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the element jobs of a fanned-out map share, written once by the run's owner: the
    element count and the map's resolved arguments (the element aside), so that an element job
    never loads or decodes its run."""

    count: int
    values: dict[str, msgspec.Raw] = {}  # parameter -> its encoded value
    lazy: dict[str, tuple[str, int]] = {}  # rf.MapResults parameter -> (map key, element count)
    reactor: str = ""  # the run's reactor (an element job naming another one is dropped)


class UndoThrow(msgspec.Struct, frozen=True):
    """One throw of a fanned-out map's rollback, written by the run's owner before it enqueues
    the throw's undo jobs: the elements it undoes (highest index first, at most `batch_size`)
    and how many elements the map's rollback has acknowledged once this throw settled."""

    end: int
    indices: list[int]


class PausedBy(msgspec.Struct, frozen=True):
    """Who paused a run with `reactor.pause`, when, and why (`rf.Run.paused_by`).

    Attributes:
        by: Who paused it: the `by=` given to `pause`, else the operator process's user and
            host (`user@host`).
        at: When (Unix time).
        reason: The `reason=` given to `pause` (`""` when none was given).
    """

    by: str
    at: float
    reason: str = ""


class RunMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a run was started with; written once."""

    v: int
    id: str
    reactor: str
    created_at: float
    inputs: msgspec.Raw
    fingerprint: dict[str, list[str]]
    idempotency_key: str | None = None
    parent_run: str | None = None  # a run started by an async_reactor step: its parent
    parent_step: str | None = None  # ... and that step's key
    retried_from: str | None = None  # a run started by `retry`: the run it retries
    redacted_inputs: Any = None  # the mask of its redacted inputs (see definition.redaction)
    redacted_results: dict[str, Any] = msgspec.field(default_factory=dict)  # step key -> mask
    # a child run of an async_reactor step with gates: the parent run's reactor and the keys
    # of the step's gates, built from the step's arguments (in the step's acquisition order)
    parent_reactor: str | None = None
    parent_gates: list[str] = msgspec.field(default_factory=list)
    version: int = 1  # the version of its reactor the run is on (a migration moves it)
    # the digest of the run's data subject (`rf.Reactor(subject=...)`; never its text)
    subject: str | None = None


class RunState(msgspec.Struct, omit_defaults=True):
    """A run's status and outcome; written on every status change (a constant number per run)."""

    status: Status
    updated_at: float
    error: RunError | None = None
    waiting_on: list[str] = msgspec.field(default_factory=list)  # ready interrupts (step keys)
    deadlines: dict[str, float] = msgspec.field(default_factory=dict)  # interrupt key -> expiry
    timeout_at: float | None = None  # the earliest deadline
    halt_reason: str | None = None
    cancel_reason: str | None = None
    rollback_trigger: RollbackTrigger | None = None  # set while rolling back
    handed_off: bool = False  # the background hand-off fired (it never fires again)
    parked_on: dict[str, float] = msgspec.field(default_factory=dict)  # unit key -> since when
    wake_at: float | None = None  # parked: when a step's next attempt is due
    gate_snoozes: int = 0  # times a worker put the run back because a gate was busy
    gate_waits: dict[str, str] = msgspec.field(default_factory=dict)  # step key -> busy gate
    # step key -> since when its rollback handler waits, parked, for its lock or semaphore
    rollback_waits: dict[str, float] = msgspec.field(default_factory=dict)
    hold_until: float | None = None  # held with a hold_timeout: when it rolls back by itself
    rewind: RewindPlan | None = None  # set while a rewind rolls back its steps
    rewinds: dict[str, int] = msgspec.field(default_factory=dict)  # step key -> times rewound
    paused_by: PausedBy | None = None  # paused by an operator (`pause`) until `resume`
    # step key ("" for the run's own gates) -> the busy gate a worker snoozed the run for
    gate_blocks: dict[str, GateBlock] = msgspec.field(default_factory=dict)


class GateBlock(msgspec.Struct, frozen=True, omit_defaults=True):
    """A busy gate a worker put the run back for (`RunState.gate_blocks`), as `rf.explain`
    reads it: the gate's kind (a `GateKind` value), its key as rendered, since when the run
    has been snoozed for it (the first snooze), and, for a rate limit, when its window frees."""

    gate: str
    key: str
    since: float
    until: float | None = None


class RewindPlan(msgspec.Struct, frozen=True, omit_defaults=True):
    """A rewind under way (`RunState.rewind`): the step it goes back to, the steps it undoes
    and runs again (that step and its dependents, in graph order; a composed step's child
    steps with it), and the changed inputs (the whole inputs, encoded; nil: unchanged)."""

    to: str
    steps: list[str]
    inputs: msgspec.Raw = NIL


class Control(msgspec.Struct, frozen=True, omit_defaults=True):
    """A request to the execution that owns a run, read at its next step boundary."""

    kind: ControlKind
    reason: str = ""
    error: RunError | None = None
    paused_by: PausedBy | None = None  # PAUSE: who asked, when and why
    actor: str = ""  # CANCEL: who asked (the event its execution writes names them)


_encoder = msgspec.msgpack.Encoder(enc_hook=enc_hook)  # (pydantic models: their JSON form)
encode = _encoder.encode
_step_decoder = msgspec.msgpack.Decoder(StepRecord)
_meta_decoder = msgspec.msgpack.Decoder(RunMeta)
_state_decoder = msgspec.msgpack.Decoder(RunState)
_event_decoder = msgspec.msgpack.Decoder(Event)
_control_decoder = msgspec.msgpack.Decoder(Control)
_element_decoder = msgspec.msgpack.Decoder(ElementRecord)
_args_decoder = msgspec.msgpack.Decoder(ElementArgs)
_throw_decoder = msgspec.msgpack.Decoder(UndoThrow)
decode_step = _step_decoder.decode
decode_meta = _meta_decoder.decode
decode_state = _state_decoder.decode
_KINDS: dict[str, EventKind] = {kind.value: kind for kind in EventKind}


def decode_event(raw: bytes) -> Event:
    """A stored event, its kind the `EventKind` member it names (kept as its string when this
    version knows no such kind).

    Raises:
        msgspec.DecodeError: the bytes are not an event.
    """
    event = _event_decoder.decode(raw)
    known = _KINDS.get(event.kind)
    if known is not None:  # (a frozen record: set once, before anyone sees it)
        msgspec.structs.force_setattr(event, "kind", known)
    return event


decode_control = _control_decoder.decode
decode_element = _element_decoder.decode
decode_element_args = _args_decoder.decode
decode_throw = _throw_decoder.decode


class _VersionOnly(msgspec.Struct):
    version: int = 1


_version_decoder = msgspec.msgpack.Decoder(_VersionOnly)


def meta_version(meta: bytes) -> int:
    """The version field of an encoded `RunMeta`, read without decoding the rest (1 when the
    bytes are not a meta: whoever acts on the run reports that)."""
    try:
        return _version_decoder.decode(meta).version
    except (msgspec.DecodeError, TypeError):
        return 1


def raw(value: Any) -> msgspec.Raw:
    """Encode a user value for embedding in a record (raises TypeError when unsupported)."""
    return msgspec.Raw(_encoder.encode(value))


def fingerprint_marker(fingerprint: dict[str, list[str]]) -> bytes:
    """Bytes that the encoded `RunMeta` of every run started with this graph `fingerprint`
    contains (its `fingerprint` field, key and value): storage finds them in a run's meta to
    tell, without decoding it, that the run's graph is unchanged (`ResumeCheck`)."""
    return _encoder.encode("fingerprint") + _encoder.encode(fingerprint)


class WorkerInfo(msgspec.Struct, frozen=True):
    """A live worker process, as its latest heartbeat says (`rf.list_workers()`).

    Attributes:
        process: Its process id.
        host: The host it runs on (its host name).
        queues: The Dramatiq queues it consumes.
        versions: Per reactor name, the versions its loaded modules declare (oldest first).
        jobs_in_flight: The jobs its actors were running at the heartbeat.
        started_at: When it started (an aware UTC datetime).
        last_seen: When it sent this heartbeat (an aware UTC datetime).
    """

    process: int
    host: str
    queues: tuple[str, ...]
    versions: dict[str, tuple[int, ...]]
    jobs_in_flight: int
    started_at: datetime
    last_seen: datetime


_worker_decoder = msgspec.msgpack.Decoder(WorkerInfo)
decode_worker = _worker_decoder.decode
encode_worker = msgspec.msgpack.Encoder().encode


class Erasure(msgspec.Struct, frozen=True):
    """An erasure of a data subject, as its audit record says (`rf.list_erasures()`): it
    carries no data of the subject, only the digest its runs were indexed by.

    Attributes:
        subject_digest: The digest of the subject erased (hex; never its text).
        at: When (an aware UTC datetime).
        actor: Who erased it (`user@host` unless given).
        runs: The runs of the subject whose values now read `"<erased>"`.
        cancelled: The ids of its runs in flight that the erasure cancelled.
    """

    subject_digest: str
    at: datetime
    actor: str
    runs: int
    cancelled: tuple[str, ...] = ()


_erasure_decoder = msgspec.msgpack.Decoder(Erasure)
decode_erasure = _erasure_decoder.decode
encode_erasure = msgspec.msgpack.Encoder().encode
