"""The closed enums of the records: run and step statuses, rollback handler kinds, control
requests, rollback triggers, halt reasons, event kinds (string enums: a member compares equal
to its value, and is stored as it)."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """The status of a run.

    A `StrEnum`: `RUNNING`, `PAUSED`, `COMPLETED`, `FAILED`, `HALTED`, `CANCELLED`, `ABORTED`,
    `ROLLING_BACK`, `HELD`, whose values are the names in lower case (a member compares equal
    to its value). Properties: `is_terminal` (completed, failed, halted, cancelled, aborted),
    `is_ended` (terminal, aborted excepted: retention applies) and `is_settled` (terminal,
    paused or held). `HELD`: a step failed under `on_failure="hold"` and the run waits for an
    operator, its completed work in effect (see [Repairing runs](repairing.md)). See
    [Concepts](concepts.md#statuses).
    """

    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    HALTED = "halted"
    CANCELLED = "cancelled"
    ABORTED = "aborted"
    ROLLING_BACK = "rolling_back"
    HELD = "held"

    @property
    def is_terminal(self) -> bool:
        """Nothing will run forward again (only `undo` may still roll some back)."""
        return self in _TERMINAL

    @property
    def is_ended(self) -> bool:
        """Nothing is owed any more: the only statuses whose runs `retention` may drop
        (api.md §13). `aborted` is terminal but not ended: its undo is still owed."""
        return self in _ENDED

    @property
    def is_settled(self) -> bool:
        """Terminal, paused or held: what `wait` waits for."""
        return self in _TERMINAL or self is Status.PAUSED or self is Status.HELD


_TERMINAL = frozenset(
    {Status.COMPLETED, Status.FAILED, Status.HALTED, Status.CANCELLED, Status.ABORTED}
)
TERMINAL: frozenset[str] = _TERMINAL
"""The terminal statuses (members compare equal to their values: test a stored string too)."""
_ENDED = _TERMINAL - {Status.ABORTED}
ENDED: frozenset[str] = _ENDED
"""The ended statuses, the only ones retention applies to (api.md §13): a run in any other
status (running, paused, rolling_back, aborted with its undo owed) never expires. The Redis
scripts carry the same list (`scripts/lib/expiry.lua`; a test checks they agree)."""


class StepStatus(StrEnum):
    """The status of one step of a run, as of its last checkpoint.

    A `StrEnum`: `PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `SKIPPED`, `WAITING`,
    `COMPENSATED`, `UNDONE`, `HALTED`. See [Concepts](concepts.md#step-statuses).
    """

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    WAITING = "waiting"
    COMPENSATED = "compensated"
    UNDONE = "undone"
    HALTED = "halted"


class HandlerKind(StrEnum):
    """Which rollback handler: what `rf.RollbackFailure.kind` names.

    A `StrEnum`: `UNDO` (`"undo"`, a completed step's), `COMPENSATE` (`"compensate"`, a
    failed step's) and `UNDO_ALL` (`"undo_all"`, a map's bulk undo).
    """

    UNDO = "undo"
    COMPENSATE = "compensate"
    UNDO_ALL = "undo_all"  # a map's bulk undo


class ControlKind(StrEnum):
    """A request left for the execution that owns a run: cancel it, fail it (with a
    rollback), or pause it (an operator's `pause`), at its next step boundary."""

    CANCEL = "cancel"
    FAIL = "fail"
    PAUSE = "pause"


class RollbackTrigger(StrEnum):
    """Why a run is rolling back: a failure (it ends `failed`), `undo` (it ends `cancelled`), or
    a `rewind` (the steps it undoes then run again: it goes on `running`)."""

    FAILURE = "failure"
    UNDO = "undo"
    REWIND = "rewind"


class HaltReason(StrEnum):
    """The halt reasons reactorflow gives itself (a step's `rf.Halt(reason)` stores its own
    text): `PERIOD` (`"period"`), a period gate of the reactor was used already in its period.
    A `StrEnum`: `run.halt_reason == rf.HaltReason.PERIOD` and `== "period"` say the same."""

    PERIOD = "period"


class EventKind(StrEnum):
    """What one entry of a run's history (`rf.Event.kind`) says happened.

    A `StrEnum` whose values are the stored names, `family.what` (`EventKind.RUN_STARTED ==
    "run.started"`): compare `event.kind` with a member or with its value. The families: `run`
    (the run started, paused, resumed, completed, halted, cancelled, rolled back, failed, was
    undone or aborted; `run.handed_off` at the `background` hand-off point, `run.parked` while
    it waits for async units or a retry holding nothing, `run.snoozed` when a gate was busy in a
    worker, `run.migrated` when a migration moved it onto a newer version), `step` (an attempt
    started, completed, failed, was retried, skipped or halted; `step.snoozed` when its gate was
    busy in a worker), `gate.acquired` (a step's gates were taken), `interrupt` (waiting,
    resumed; `interrupt.accepted`: a payload was accepted without the `running` write of the
    claim's own call, so it names who gave it), `compose.started`, `async` (`async.dispatched`:
    a unit was handed to a worker, for an async reactor with the child run id as detail;
    `async.finished`: an async reactor's child reported its end), `undo` and `compensate`
    (started, completed, failed), `undo_all.failed` (a map's bulk undo raised), and
    `history.unreadable` (a stored event that could not be read back, in its place).
    """

    # the run
    RUN_STARTED = "run.started"
    RUN_PAUSED = "run.paused"
    RUN_RESUMED = "run.resumed"
    RUN_COMPLETED = "run.completed"
    RUN_HALTED = "run.halted"
    RUN_CANCELLED = "run.cancelled"
    RUN_ROLLING_BACK = "run.rolling_back"
    RUN_FAILED = "run.failed"
    RUN_UNDO_REQUESTED = "run.undo_requested"
    RUN_UNDONE = "run.undone"
    RUN_ABORTED = "run.aborted"
    RUN_HANDED_OFF = "run.handed_off"
    RUN_PARKED = "run.parked"
    RUN_SNOOZED = "run.snoozed"
    RUN_MIGRATED = "run.migrated"  # moved onto a newer version; detail: what the hooks did
    RUN_HELD = "run.held"  # a step failed under on_failure="hold": the run waits, nothing undone
    RUN_REPAIRED = "run.repaired"  # an operator's retry_step or skip_step took a held run on
    RUN_HOLD_EXPIRED = "run.hold_expired"  # its hold_timeout passed: it rolls back by itself
    RUN_REWINDING = "run.rewinding"  # an operator's rewind: its steps are undone, newest first
    RUN_REWOUND = "run.rewound"  # the rewound steps were undone: they run again from here
    # a step
    STEP_STARTED = "step.started"
    STEP_COMPLETED = "step.completed"
    STEP_FAILED = "step.failed"
    STEP_RETRIED = "step.retried"
    STEP_SKIPPED = "step.skipped"
    STEP_HALTED = "step.halted"
    STEP_SNOOZED = "step.snoozed"
    GATE_ACQUIRED = "gate.acquired"
    SLEEP_STARTED = "sleep.started"  # a sleep step checkpointed its deadline; the run parks
    SLEEP_WOKE = "sleep.woke"  # its deadline came: the sleep completed
    INTERRUPT_WAITING = "interrupt.waiting"
    INTERRUPT_RESUMED = "interrupt.resumed"
    # a payload accepted without the claim's own `running` write (another execution holds the
    # run and applies it, the run was running already, or its gates come first): step, actor
    INTERRUPT_ACCEPTED = "interrupt.accepted"
    COMPOSE_STARTED = "compose.started"
    ASYNC_DISPATCHED = "async.dispatched"
    ASYNC_FINISHED = "async.finished"
    # rollback
    UNDO_STARTED = "undo.started"
    UNDO_COMPLETED = "undo.completed"
    UNDO_FAILED = "undo.failed"
    COMPENSATE_STARTED = "compensate.started"
    COMPENSATE_COMPLETED = "compensate.completed"
    COMPENSATE_FAILED = "compensate.failed"
    UNDO_ALL_FAILED = "undo_all.failed"
    # reading back
    HISTORY_UNREADABLE = "history.unreadable"
