"""Middleware: observers of runs, steps, compensations, undos and retries.

Subclass `Middleware` and override the hooks you need (all are no-ops). Hooks are called in the
event loop and must not block; their return values are ignored, and an exception raised by a hook
is logged and swallowed, so a broken observer never changes a run.

A `StepEvent.error` is the exception the step raised, unless its message or traceback names a
value of the run marked `rf.Redacted`: then it is an `rf.RecordedError` with the exception's
type name and its message scrubbed (see reactorflow.redaction).

Two hooks carry context across workers (tracing uses them): `inject(run_id, headers)` is called
when a job for a worker is enqueued, in the enqueuer's context, and may add string entries to
the job's headers; `job_context(headers)` returns a context manager the worker runs the job in.
A `before_*` hook is called in the task that then runs the step (or rollback action), and its
`after_*` hook in the same task, so a hook pair may set context (e.g. a current span) around it.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reactorflow.errors import RecordedError
from reactorflow.redaction import known_secrets, scrub

log = logging.getLogger("reactorflow.middleware")


@dataclass(frozen=True, slots=True)
class RunEvent:
    """What run hooks (`before_run`, `after_run`) receive.

    Attributes:
        run_id: The run's id.
        reactor: The reactor's name.
        status: The run's status.
        error: An `rf.RunError` when the run failed, else `None`.
        first: `before_run` of the run's first execution (its start: no step of it has run
            yet; an execution cut off before its first step is counted again).
    """

    run_id: str
    reactor: str
    status: str = "running"
    error: Any = None  # rf.RunError when the run failed
    first: bool = False


@dataclass(frozen=True, slots=True)
class StepEvent:
    """What step, retry and rollback hooks receive.

    Attributes:
        run_id: The run's id.
        reactor: The reactor's name.
        step: The step's key: `"charge"`, or `"fulfil.approve"` inside a composed child.
        attempt: The attempt's number (1-based; 0 where none applies).
        status: The step's status, where known.
        error: The exception, if any.
        delay: Retries: seconds until the next attempt.
    """

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
    waits no longer, or a worker snoozes), or released: what `on_gate` receives.

    The same moments are logged as `reactorflow.gate.<action>` lines (busy and snoozed at INFO,
    the others at DEBUG).

    Attributes:
        run_id: The run's id.
        reactor: The reactor's name.
        step: The step's key, or `""` for the reactor's own gates.
        gate: What gate: `"lock"`, `"semaphore"`, `"rate_limit"`, `"period"`,
            `"ordered_lock"`.
        key: The gate's key as built.
        action: `"acquired"`, `"busy"`, `"snoozed"` or `"released"`.
        waited: `"acquired"`: seconds the taking waited for the gate in this process (0 when
            it was free; a worker that snoozed on it counts each try on its own).
    """

    run_id: str
    reactor: str
    step: str
    gate: str  # "lock", "semaphore", "rate_limit", "period", "ordered_lock"
    key: str
    action: str  # "acquired", "busy", "snoozed", "released"
    waited: float = 0.0


@dataclass(frozen=True, slots=True)
class TimerEvent:
    """A run's timer fired (a sleep's deadline, a parked retry, an interrupt's deadline): what
    `on_timer` receives, in the process that fired it (a worker's firing loop, the embedded
    worker's, `rf.fire_timers()` or the test kit).

    Attributes:
        run_id: The run the timer woke.
        reactor: Its reactor's name.
        due: When the timer fell due (Unix time).
        fired: When it was fired (Unix time; never before `due`).
    """

    run_id: str
    reactor: str
    due: float
    fired: float

    @property
    def lateness(self) -> float:
        """Seconds from `due` to `fired`."""
        return max(0.0, self.fired - self.due)


class Middleware:
    """The base class of observers: every hook is a no-op to override.

    Hooks are called in the event loop and must not block; their return values are ignored, and
    an exception raised by a hook is logged and swallowed. Pass instances to
    `rf.configure(middleware=...)` or `rf.Reactor(..., middleware=...)`. See
    [Concepts](concepts.md#middleware-and-logs).
    """

    def before_run(self, event: RunEvent) -> None:
        """Called before a run starts executing in this process (a start, a resume, a retry).

        Args:
            event: The run concerned.
        """

    def after_run(self, event: RunEvent) -> None:
        """Called after a run settles here (completed, failed, paused, halted, cancelled...).

        Args:
            event: The run concerned.
        """

    def before_step(self, event: StepEvent) -> None:
        """Called before each attempt of a step.

        Args:
            event: The run's step concerned.
        """

    def after_step(self, event: StepEvent) -> None:
        """Called after each attempt of a step (its `status` and `error` say how it ended).

        Args:
            event: The run's step concerned.
        """

    def before_compensate(self, event: StepEvent) -> None:
        """Called before a failed step's compensate handler runs.

        Args:
            event: The run's step concerned.
        """

    def after_compensate(self, event: StepEvent) -> None:
        """Called after a failed step's compensate handler ran.

        Args:
            event: The run's step concerned.
        """

    def before_undo(self, event: StepEvent) -> None:
        """Called before a completed step's undo handler runs (rollback).

        Args:
            event: The run's step concerned.
        """

    def after_undo(self, event: StepEvent) -> None:
        """Called after a completed step's undo handler ran.

        Args:
            event: The run's step concerned.
        """

    def before_retry(self, event: StepEvent) -> None:
        """Called when a failed attempt will be retried (`delay`: seconds until the next).

        Args:
            event: The run's step concerned.
        """

    def after_retry(self, event: StepEvent) -> None:
        """Called when the retried attempt starts, after the delay.

        Args:
            event: The run's step concerned.
        """

    def on_gate(self, event: GateEvent) -> None:
        """Called when a gate of a run is acquired, found busy, snoozed on or released.

        Args:
            event: The gate and what happened to it.
        """

    def on_timer(self, event: TimerEvent) -> None:
        """Called when a timer of a run fires, before the run's resume is sent.

        Args:
            event: The timer, when it was due and when it fired.
        """

    def inject(self, run_id: str, headers: dict[str, str]) -> None:
        """Called when a job for a worker is enqueued, in the enqueuer's context: add string
        entries to the job's headers (tracing adds the W3C trace context).

        Args:
            run_id: The run the job is for.
            headers: The job's headers so far; add to it.
        """

    def job_context(self, headers: Mapping[str, str]) -> AbstractContextManager[object]:
        """The context manager a worker runs a job in (tracing makes the trace the headers
        carry current).

        Args:
            headers: The job's headers, as `inject` hooks left them.
        """
        return nullcontext()


class Hook(StrEnum):
    """The hooks `Hooks.call` calls: each value is the name of the `Middleware` method it
    calls (`inject` and `job_context` are called by `Hooks.headers` and `Hooks.job_context`).
    """

    BEFORE_RUN = "before_run"
    AFTER_RUN = "after_run"
    BEFORE_STEP = "before_step"
    AFTER_STEP = "after_step"
    BEFORE_COMPENSATE = "before_compensate"
    AFTER_COMPENSATE = "after_compensate"
    BEFORE_UNDO = "before_undo"
    AFTER_UNDO = "after_undo"
    BEFORE_RETRY = "before_retry"
    AFTER_RETRY = "after_retry"
    ON_GATE = "on_gate"
    ON_TIMER = "on_timer"


class Hooks:
    """Calls one hook on every middleware, isolating failures."""

    __slots__ = ("_chain",)

    def __init__(self, chain: Sequence[Middleware]) -> None:
        self._chain = tuple(chain)

    def __bool__(self) -> bool:
        return bool(self._chain)

    def headers(self, run_id: str) -> dict[str, str]:
        """The headers every middleware adds to a job for `run_id`."""
        headers: dict[str, str] = {}
        for middleware in self._chain:
            try:
                middleware.inject(run_id, headers)
            except Exception:
                log.exception("reactorflow.middleware.failed middleware=%s hook=inject "
                              "run_id=%s", type(middleware).__name__, run_id)
        return headers

    def job_context(self, headers: Mapping[str, str]) -> ExitStack:
        """Every middleware's job context, entered in order (one that fails is left out)."""
        stack = ExitStack()
        for middleware in self._chain:
            try:
                stack.enter_context(middleware.job_context(headers))
            except Exception:
                log.exception("reactorflow.middleware.failed middleware=%s hook=job_context",
                              type(middleware).__name__)
        return stack

    def call(self, hook: Hook, event: RunEvent | StepEvent | GateEvent | TimerEvent) -> None:
        if isinstance(event, StepEvent) and event.error is not None:
            event = scrubbed(event)
        for middleware in self._chain:
            try:
                getattr(middleware, hook)(event)
            except Exception:
                log.exception(
                    "reactorflow.middleware.failed middleware=%s hook=%s run_id=%s",
                    type(middleware).__name__, hook, event.run_id,
                )


def scrubbed(event: StepEvent) -> StepEvent:
    """The event as middleware see it: an error naming a known secret of the run (in its
    message or anywhere in its traceback) becomes an `rf.RecordedError`, its message scrubbed."""
    error = event.error
    assert error is not None
    secrets = known_secrets()
    if not secrets:
        return event
    try:
        text = "".join(traceback.format_exception(error))
        message = str(error)
    except Exception:  # a broken __str__: nothing of it is passed on
        text = message = ""
    if scrub(text, secrets) == text:
        return event
    hidden = RecordedError(type(error).__name__, scrub(message, secrets), step=event.step)
    return dataclasses.replace(event, error=hidden)
