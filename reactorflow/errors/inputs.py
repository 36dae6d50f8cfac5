"""Errors about what a run was started or continued with."""

from __future__ import annotations

from collections.abc import Sequence

from reactorflow.errors.core import ReactorflowError, StepLabel, ValidationFailed, _key


class InputValidationError(ValidationFailed):
    """The inputs of a run failed validation: nothing was stored. For a child's inputs mapped by
    a step (`step` is set), that step failed and its run rolls back.

    Attributes:
        reactor: The reactor whose inputs were refused.
        field: The field at fault (a dotted path for nested fields).
        reason: Why it was refused.
    """

    def __init__(self, reactor: str, field: str, reason: str, *,
                 step: str | None = None) -> None:
        if step is None:
            message = (f"invalid input for reactor {reactor!r}: {field}: {reason}. Fix that "
                       "field and run again (nothing was stored).")
        else:
            message = (f"invalid input for child reactor {reactor!r}, as returned by step "
                       f"{step!r}: {field}: {reason}. Make that step's function return valid "
                       "inputs; the step failed, so its run rolls back (the child was not "
                       "started).")
        super().__init__(message, step=step)
        self.reactor = reactor
        self.field = field
        self.reason = reason


class PayloadValidationError(ValidationFailed):
    """An interrupt payload failed validation. From `continue_` the attempt was counted; from a
    check (`rf.validate_payload`, `reactorflow continue --check`, the dashboard's form) nothing
    was sent and nothing was counted (`counted` is False).

    Attributes:
        label: The interrupt's name, or its path inside composed children (`step` is the
            path joined with `.`).
        field: The payload field at fault.
        reason: Why it was refused.
        attempts: The attempts counted so far, this one included (0 for a check).
        max_attempts: The interrupt's `max_attempts` (`None`: no limit).
        exhausted: This was the last attempt: the run was rolled back and is failed.
        counted: The refusal counted an attempt (False for a check).
        reactor: The interrupt's reactor, when no run was named (`rf.validate_payload`).
    """

    def __init__(
        self,
        run_id: str | None,
        step: StepLabel,
        field: str,
        reason: str,
        *,
        attempts: int,
        max_attempts: int | None,
        exhausted: bool,
        counted: bool = True,
        reactor: str | None = None,
    ) -> None:
        if not counted:
            limit = "" if max_attempts is None else f" (of the {max_attempts} it allows)"
            tail = f"checked only: nothing was sent and no attempt{limit} was counted"
        elif exhausted:
            tail = (
                f"this was attempt {attempts} of {max_attempts}, the last one: the run was rolled "
                "back and is now failed"
            )
        elif max_attempts is not None:
            tail = (
                f"attempt {attempts} of {max_attempts}; the run is still paused, send a corrected "
                "payload"
            )
        else:
            tail = f"attempt {attempts}; the run is still paused, send a corrected payload"
        of = f"run {run_id!r}" if run_id is not None else f"reactor {reactor!r}"
        super().__init__(
            f"invalid payload for interrupt {step!r} of {of}: {field}: {reason} ({tail})",
            run_id=run_id,
            step=_key(step),
        )
        self.label = step
        self.field = field
        self.reason = reason
        self.attempts = attempts
        self.max_attempts = max_attempts
        self.exhausted = exhausted
        self.counted = counted
        self.reactor = reactor


class UnknownInterrupt(ReactorflowError):
    """`rf.validate_payload` named a step that is not an interrupt of the reactor.

    Attributes:
        reactor: The reactor.
        label: The step that was named (a name, or a path).
        interrupts: The reactor's interrupts (names, or paths inside composed children).
    """

    def __init__(self, reactor: str, step: StepLabel, interrupts: Sequence[StepLabel]) -> None:
        listed = ", ".join(repr(i) for i in interrupts) if interrupts else "none"
        super().__init__(
            f"reactor {reactor!r} has no interrupt {step!r}; its interrupts: {listed}. Name one "
            "of those (a nested one as a path such as ('fulfil', 'approve')).",
            step=_key(step),
        )
        self.reactor = reactor
        self.label = step
        self.interrupts = list(interrupts)


class ResultValidationError(ValidationFailed):
    """A result given by hand (`skip_step(..., result=)`) does not fit the step's return type:
    nothing was written.

    Attributes:
        field: The field at fault (a dotted path; `$` for the value itself).
        reason: Why it was refused.
    """

    def __init__(self, run_id: str, step: str, field: str, reason: str) -> None:
        super().__init__(
            f"cannot skip step {step!r} of run {run_id!r} with that result: {field}: {reason}. "
            "Give a result of the step's return type (nothing was written).",
            run_id=run_id, step=step)
        self.field = field
        self.reason = reason
