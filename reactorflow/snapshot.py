"""What users read back: `rf.Run`, `rf.StepState`, `rf.RunPage` (immutable snapshots)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from reactorflow.records import Event, PausedBy, RunError
from reactorflow.status import Status, StepStatus

_UNSET: Any = object()


class StepState(msgspec.Struct, frozen=True, dict=True):
    """One step of a run as of its last checkpoint.

    `result` is the step's return value, decoded with its return annotation (a composed step:
    the child's value), once the step completed; it is kept when the step is later undone, and
    is None for a step with no result. It is decoded on first access, not when the snapshot is
    built (it is not one of the fields: encoding a snapshot leaves it out). A map step's
    `result` is its number of elements.

    Attributes:
        status: An `rf.StepStatus`.
        attempts: Attempts made.
        started_at: When the step started (Unix time), else `None`.
        finished_at: When it finished (Unix time), else `None`.
        error: `"Type: message"` when the step or its rollback handler failed, else `None`.
        gate: For a pending step that a worker put back because one of its gates was busy,
            that gate (`"lock 'account:A1'"`), else `None`.
        wake_at: For a sleep step that is `waiting`, its deadline (an aware UTC `datetime`);
            `None` on every other step.
    """

    status: StepStatus
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None  # "Type: message" when the step failed or its rollback did
    gate: str | None = None  # a pending step put back because this gate was busy: "lock 'k'"
    wake_at: datetime | None = None  # a sleep step waiting for its deadline: until when (UTC)

    @property
    def result(self) -> Any:
        """The step's result (decoded from storage on first read), or `None`."""
        known = self.__dict__.get("_result", _UNSET)
        if known is not _UNSET:
            return known
        load: Callable[[], Any] | None = self.__dict__.get("_load")
        value = load() if load is not None else None
        self.__dict__["_result"] = value  # decoded once (a concurrent first read decodes too)
        return value

    def __reduce__(self) -> tuple[Any, ...]:  # a pickled or copied state keeps its result
        return (_restore, (msgspec.structs.astuple(self), self.result))


def attach_result(state: StepState, *, value: Any = _UNSET,
                  load: Callable[[], Any] | None = None) -> StepState:
    """Give a new `state` its result: a decoded `value`, or a `load` that decodes it when it is
    first read."""
    if value is not _UNSET:
        state.__dict__["_result"] = value
    elif load is not None:
        state.__dict__["_load"] = load
    return state


def _restore(fields: tuple[Any, ...], result: Any) -> StepState:
    return attach_result(StepState(*fields), value=result)


class Run(msgspec.Struct, frozen=True):
    """A snapshot of a run. Read it again with `reactor.get(run.id)` to see later progress.

    The immutable snapshot (a `msgspec.Struct`) returned by `run`, `get`, `wait`, `continue_`,
    `undo`, `cancel`, `retry`, `pause` and `resume`. Property `ok`: the run completed.

    Attributes:
        id: The run's id.
        reactor: The reactor's name.
        status: An `rf.Status`.
        value: The reactor's value when completed, typed by its annotation; else `None`.
        error: An `rf.RunError` when the run failed, else `None`.
        waiting_on: The pending interrupts: names at the root, tuple paths inside children.
        steps: `rf.StepState` by step key.
        history: The run's `rf.Event`s, oldest first.
        created_at: When the run was created (Unix time).
        updated_at: When it was last written (Unix time).
        timeout_at: The earliest deadline of the interrupts the run still waits on, else `None`.
        halt_reason: Why a step halted the run (`rf.Halt`), else `None`.
        cancel_reason: The `reason` given to `cancel`, else `None`.
        inputs: The run's inputs, decoded into the inputs type.
        replayed: `True` only on what `run`/`dispatch` return for an idempotency key an earlier
            start holds (this call started nothing).
        retried_from: The run a `retry` started this one from, else `None`.
        version: The version of its reactor the run is on (`rf.Reactor(version=)`; a
            migration moves it to a newer one).
        paused_by: An `rf.PausedBy` (who, when, why) while an operator's `pause` holds the run
            `paused` (until `resume`), else `None` (also for a run paused at an interrupt).
    """

    id: str
    reactor: str
    status: Status
    value: Any = None
    error: RunError | None = None
    waiting_on: list[str | tuple[str, ...]] = msgspec.field(default_factory=list)
    steps: dict[str, StepState] = msgspec.field(default_factory=dict)
    history: list[Event] = msgspec.field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0
    timeout_at: float | None = None
    halt_reason: str | None = None
    cancel_reason: str | None = None
    inputs: Any = None
    replayed: bool = False
    """True when this is the snapshot of an earlier start with the same idempotency key (this
    call started nothing); False for the run this call started, and for every read."""
    retried_from: str | None = None  # a run started by `retry`: the id of the run it retries
    version: int = 1
    paused_by: PausedBy | None = None

    @property
    def ok(self) -> bool:
        """True when the run completed."""
        return self.status is Status.COMPLETED


class RunSummary(msgspec.Struct, frozen=True):
    """One row of `list_runs`.

    Attributes:
        id: The run's id.
        reactor: The reactor's name.
        status: An `rf.Status`.
        created_at: When the run was created (Unix time).
        updated_at: When it was last written (Unix time).
        error: An `rf.RunError` when the run failed, else `None`.
        waiting_on: The pending interrupts.
        version: The version of its reactor the run is on.
    """

    id: str
    reactor: str
    status: Status
    created_at: float
    updated_at: float
    error: RunError | None = None
    waiting_on: list[str | tuple[str, ...]] = msgspec.field(default_factory=list)
    version: int = 1


class RunPage(msgspec.Struct, frozen=True):
    """A page of runs, newest first; pass `next_cursor` back for the next page (None: the end).

    Attributes:
        runs: `rf.RunSummary` rows, newest first.
        next_cursor: Pass it back for the next page; `None` at the end.
        unreadable: The ids of runs this page would hold whose record cannot be read (a
            corrupt or foreign value under the run's key): left out, never failing the page;
            `get` of one raises `rf.CorruptRecord` saying what is wrong.
    """

    runs: list[RunSummary]
    next_cursor: str | None = None
    unreadable: list[str] = msgspec.field(default_factory=list)
