"""What users read back: `rf.Run`, `rf.StepState`, `rf.RunPage` (immutable snapshots)."""

from __future__ import annotations

from typing import Any

import msgspec

from reactorflow.records import Event, RunError
from reactorflow.status import Status, StepStatus


class StepState(msgspec.Struct, frozen=True):
    """One step of a run as of its last checkpoint."""

    status: StepStatus
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None  # "Type: message" when the step failed or its rollback did


class Run(msgspec.Struct, frozen=True):
    """A snapshot of a run. Read it again with `reactor.get(run.id)` to see later progress."""

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

    @property
    def ok(self) -> bool:
        """True when the run completed."""
        return self.status is Status.COMPLETED


class RunSummary(msgspec.Struct, frozen=True):
    """One row of `list_runs`."""

    id: str
    reactor: str
    status: Status
    created_at: float
    updated_at: float
    error: RunError | None = None
    waiting_on: list[str | tuple[str, ...]] = msgspec.field(default_factory=list)


class RunPage(msgspec.Struct, frozen=True):
    """A page of runs, newest first; pass `next_cursor` back for the next page (None: the end)."""

    runs: list[RunSummary]
    next_cursor: str | None = None
