"""Middleware: observers of runs, steps, compensations, undos and retries.

Subclass `Middleware` and override the hooks you need (all are no-ops). Hooks are called in the
event loop and must not block; their return values are ignored, and an exception raised by a hook
is logged and swallowed, so a broken observer never changes a run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("reactorflow.middleware")


@dataclass(frozen=True, slots=True)
class RunEvent:
    run_id: str
    reactor: str
    status: str = "running"
    error: Any = None  # rf.RunError when the run failed


@dataclass(frozen=True, slots=True)
class StepEvent:
    run_id: str
    reactor: str
    step: str  # the step's key: "charge", or "fulfil.approve" inside a composed child
    attempt: int = 0
    status: str = ""
    error: BaseException | None = None
    delay: float = 0.0  # retries: seconds until the next attempt


@dataclass(frozen=True, slots=True)
class GateEvent:
    """A gate of a run (`step` "" for the reactor's own) was acquired, found busy (the caller
    waits no longer, or a worker snoozes), or released."""

    run_id: str
    reactor: str
    step: str
    gate: str  # "lock", "semaphore", "rate_limit", "period", "ordered_lock"
    key: str
    action: str  # "acquired", "busy", "snoozed", "released"


class Middleware:
    """Base class with no-op hooks."""

    def before_run(self, event: RunEvent) -> None: ...
    def after_run(self, event: RunEvent) -> None: ...
    def before_step(self, event: StepEvent) -> None: ...
    def after_step(self, event: StepEvent) -> None: ...
    def before_compensate(self, event: StepEvent) -> None: ...
    def after_compensate(self, event: StepEvent) -> None: ...
    def before_undo(self, event: StepEvent) -> None: ...
    def after_undo(self, event: StepEvent) -> None: ...
    def before_retry(self, event: StepEvent) -> None: ...
    def after_retry(self, event: StepEvent) -> None: ...
    def on_gate(self, event: GateEvent) -> None: ...


class Hooks:
    """Calls one hook on every middleware, isolating failures."""

    __slots__ = ("_chain",)

    def __init__(self, chain: Sequence[Middleware]) -> None:
        self._chain = tuple(chain)

    def __bool__(self) -> bool:
        return bool(self._chain)

    def call(self, hook: str, event: RunEvent | StepEvent | GateEvent) -> None:
        for middleware in self._chain:
            try:
                getattr(middleware, hook)(event)
            except Exception:
                log.exception(
                    "reactorflow.middleware.failed middleware=%s hook=%s run_id=%s",
                    type(middleware).__name__, hook, event.run_id,
                )
