"""Run and step statuses (string enums: a member compares equal to its value)."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """The status of a run.

    A `StrEnum`: `RUNNING`, `PAUSED`, `COMPLETED`, `FAILED`, `HALTED`, `CANCELLED`, `ABORTED`,
    `ROLLING_BACK`, whose values are the names in lower case (a member compares equal to its
    value). Properties: `is_terminal` (completed, failed, halted, cancelled, aborted),
    `is_ended` (terminal, aborted excepted: retention applies) and `is_settled` (terminal or
    paused). See [Concepts](concepts.md#statuses).
    """

    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    HALTED = "halted"
    CANCELLED = "cancelled"
    ABORTED = "aborted"
    ROLLING_BACK = "rolling_back"

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
        """Terminal or paused: what `wait` waits for."""
        return self in _TERMINAL or self is Status.PAUSED


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
    """Which rollback handler a `RollbackFailure` names."""

    UNDO = "undo"
    COMPENSATE = "compensate"
    UNDO_ALL = "undo_all"  # a map's bulk undo


class ControlKind(StrEnum):
    """A request left for the execution that owns a run."""

    CANCEL = "cancel"
    FAIL = "fail"


class RollbackTrigger(StrEnum):
    """Why a run is rolling back: a failure (it ends `failed`) or `undo` (it ends `cancelled`)."""

    FAILURE = "failure"
    UNDO = "undo"
