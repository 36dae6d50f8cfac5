"""Readable assertions on a run's history: which steps ran, which were undone, in what order."""

from __future__ import annotations

from reactorflow.records import Event
from reactorflow.snapshot import Run
from reactorflow.status import EventKind

ROLLBACK_DONE = frozenset({EventKind.UNDO_COMPLETED, EventKind.COMPENSATE_COMPLETED})


def executed(run: Run) -> list[str]:
    """The steps whose body completed, in completion order (a step retried to success once)."""
    return [e.step for e in run.history if e.kind == EventKind.STEP_COMPLETED]


def undone(run: Run) -> list[str]:
    """The steps undone or compensated by a rollback, in the order it happened."""
    return [e.step for e in run.history if e.kind in ROLLBACK_DONE]


def events(run: Run, *kinds: str) -> list[Event]:
    """The run's events of the given kinds (every event when none is given), oldest first."""
    return [e for e in run.history if not kinds or e.kind in kinds]
