"""Sealing the error text of records as they are encoded for storage.

Values (inputs, results, payloads, map items and outcomes) are sealed where they are encoded
(`RunKeys.seal_raw`) and stay sealed in process until a reader opens them. Error text is
different: it is made in many places (every failure path) and read in process as text, so it
stays clear in process and is sealed when its record is encoded, here: `step`, `state`,
`event`, `element`, `control`. Each is idempotent (text already sealed is kept: a record read
back and saved again is unchanged) and returns the record itself when it holds no clear text
(the common case costs a few attribute reads). Every error text of a run is bound to the
field `"error"`: a run's error is its failing step's, copied.
"""

from __future__ import annotations

import msgspec

from reactorflow.protection.envelope import TEXT_PREFIX
from reactorflow.protection.fields import ERROR
from reactorflow.protection.keys import RunKeys
from reactorflow.records import (
    Control,
    ElementRecord,
    ErrorRecord,
    Event,
    RunError,
    RunState,
    StepRecord,
)
from reactorflow.status import ControlKind, EventKind

ERROR_DETAILS = frozenset({
    EventKind.STEP_FAILED, EventKind.STEP_RETRIED, EventKind.RUN_FAILED, EventKind.RUN_HELD,
    EventKind.UNDO_FAILED, EventKind.COMPENSATE_FAILED, EventKind.UNDO_ALL_FAILED,
    EventKind.RUN_ROLLING_BACK,
})
"""The events whose detail may hold error text (an exception's message). Other details are
structure (a child run's id, an interrupt's key, a status, a deadline) or an operator's or a
halt's reason, which stay clear, as `RunState.cancel_reason` and `halt_reason` do."""


def _clear(text: str) -> bool:
    return bool(text) and not text.startswith(TEXT_PREFIX)


def error(keys: RunKeys, record: ErrorRecord | None) -> ErrorRecord | None:
    """An error record with its message and traceback sealed."""
    if record is None or not (_clear(record.message) or _clear(record.traceback)):
        return record
    return msgspec.structs.replace(record, message=_text(keys, record.message),
                                   traceback=_text(keys, record.traceback))


def _text(keys: RunKeys, text: str) -> str:
    return keys.seal_text(ERROR, text) if _clear(text) else text


def run_error(keys: RunKeys, value: RunError | None) -> RunError | None:
    """A run's error with its text (and its rollback failures') sealed."""
    if value is None or not (_clear(value.message) or _clear(value.traceback) or any(
            _clear(f.message) for f in value.rollback_failures)):
        return value
    return RunError(value.step, value.type, _text(keys, value.message),
                    _text(keys, value.traceback),
                    [msgspec.structs.replace(f, message=_text(keys, f.message))
                     for f in value.rollback_failures])


def step(keys: RunKeys, record: StepRecord) -> StepRecord:
    """A step record as stored: its error texts sealed."""
    if record.error is None and record.rollback_error is None:
        return record
    sealed, rolled = error(keys, record.error), error(keys, record.rollback_error)
    if sealed is record.error and rolled is record.rollback_error:
        return record
    return msgspec.structs.replace(record, error=sealed, rollback_error=rolled)


def state(keys: RunKeys, value: RunState) -> RunState:
    """A run's state as stored: its error's text sealed (the state itself is not changed)."""
    sealed = run_error(keys, value.error)
    return value if sealed is value.error else msgspec.structs.replace(value, error=sealed)


def event(keys: RunKeys, value: Event) -> Event:
    """An event as stored: the detail of a failure event sealed."""
    if not value.detail or value.kind not in ERROR_DETAILS or not _clear(value.detail):
        return value
    return msgspec.structs.replace(value, detail=keys.seal_text(ERROR, value.detail))


def control(keys: RunKeys, value: Control) -> Control:
    """A control request as stored: the error it carries sealed (and a FAIL's reason, which
    is that error's text)."""
    sealed = run_error(keys, value.error)
    reason = (_text(keys, value.reason) if value.kind is ControlKind.FAIL else value.reason)
    if sealed is value.error and reason is value.reason:
        return value
    return msgspec.structs.replace(value, error=sealed, reason=reason)


def element(keys: RunKeys, record: ElementRecord) -> ElementRecord:
    """A map element's outcome as stored: its error texts, and those of the step records
    nested in it, sealed."""
    nested = {key: step(keys, r) for key, r in record.steps.items()} if record.steps else None
    sealed, rolled = error(keys, record.error), error(keys, record.rollback_error)
    if (sealed is record.error and rolled is record.rollback_error
            and (nested is None or all(nested[k] is record.steps[k] for k in nested))):
        return record
    return msgspec.structs.replace(record, error=sealed, rollback_error=rolled,
                                   steps=nested if nested is not None else record.steps)
