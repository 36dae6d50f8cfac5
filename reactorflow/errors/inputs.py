"""Errors about what a run was started or continued with."""

from __future__ import annotations

from reactorflow.errors.core import ReactorflowError, StepLabel, _key


class InputValidationError(ReactorflowError):
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


class PayloadValidationError(ReactorflowError):
    """An interrupt payload failed validation; the attempt was counted.

    Attributes:
        label: The interrupt's name, or its path inside composed children (`step` is the
            path joined with `.`).
        field: The payload field at fault.
        reason: Why it was refused.
        attempts: The attempts counted so far, this one included.
        max_attempts: The interrupt's `max_attempts` (`None`: no limit).
        exhausted: This was the last attempt: the run was rolled back and is failed.
    """

    def __init__(
        self,
        run_id: str,
        step: StepLabel,
        field: str,
        reason: str,
        *,
        attempts: int,
        max_attempts: int | None,
        exhausted: bool,
    ) -> None:
        if exhausted:
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
        super().__init__(
            f"invalid payload for interrupt {step!r} of run {run_id!r}: {field}: {reason} ({tail})",
            run_id=run_id,
            step=_key(step),
        )
        self.label = step
        self.field = field
        self.reason = reason
        self.attempts = attempts
        self.max_attempts = max_attempts
        self.exhausted = exhausted
