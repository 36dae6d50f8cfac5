"""Finding the sealed values in a run's stored records, each with the field it is bound to
(`protection.fields`), and rebuilding a record with some of them replaced.

A record is decoded into its struct (`records`), its sealed values visited, and encoded again
only when one of them was replaced: what `keys check` counts and `keys rotate` re-seals.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from reactorflow import records
from reactorflow.protection import fields
from reactorflow.protection.sealing import ERROR_DETAILS
from reactorflow.records import (
    ElementRecord,
    ErrorRecord,
    Event,
    RollbackFailure,
    RunError,
    RunMeta,
    RunState,
    StepRecord,
)

Bytes = Callable[[str, bytes], bytes]
"""A visitor of a sealed (or clear) value: (field, its bytes) -> its bytes as they stay."""
Text = Callable[[str], str]
"""A visitor of an error text (every error text is bound to `fields.ERROR`)."""


def raw(visit: Bytes, field: str, value: msgspec.Raw) -> msgspec.Raw:
    """`value` as `visit` returns it (nil: no value, not visited)."""
    if value is records.NIL:
        return value
    data = bytes(value)
    found = visit(field, data)
    return value if found is data else msgspec.Raw(found)


def _error(text: Text, error: ErrorRecord | None) -> ErrorRecord | None:
    if error is None:
        return None
    message, trace = text(error.message), text(error.traceback)
    if message is error.message and trace is error.traceback:
        return error
    return msgspec.structs.replace(error, message=message, traceback=trace)


def meta(visit: Bytes, value: RunMeta) -> RunMeta:
    """The meta with its inputs visited."""
    inputs = raw(visit, fields.INPUTS, value.inputs)
    return value if inputs is value.inputs else msgspec.structs.replace(value, inputs=inputs)


def state(text: Text, value: RunState) -> RunState:
    """The state with its error's texts visited."""
    error = value.error
    if error is None:
        return value
    message, trace = text(error.message), text(error.traceback)
    failures = [f if (m := text(f.message)) is f.message
                else RollbackFailure(f.step, f.kind, m, f.type) for f in error.rollback_failures]
    if (message is error.message and trace is error.traceback
            and all(a is b for a, b in zip(failures, error.rollback_failures, strict=True))):
        return value
    return msgspec.structs.replace(value, error=RunError(error.step, error.type, message, trace,
                                                         failures))


def step(visit: Bytes, text: Text, key: str, record: StepRecord, *,
         prefix: str = "") -> StepRecord:
    """A step record with its result, its child inputs and its error texts visited (`prefix`:
    the field prefix of an element reactor's nested record)."""
    result = raw(visit, prefix + fields.result(key), record.result)
    child = raw(visit, prefix + fields.child_inputs(key), record.child_inputs)
    error, rolled = _error(text, record.error), _error(text, record.rollback_error)
    if (result is record.result and child is record.child_inputs and error is record.error
            and rolled is record.rollback_error):
        return record
    return msgspec.structs.replace(record, result=result, child_inputs=child, error=error,
                                   rollback_error=rolled)


def event(text: Text, value: Event) -> Event:
    """An event with its detail visited, where it may hold error text (a failure event's: the
    codec seals those, `sealing.ERROR_DETAILS`; other details are structure, kept clear)."""
    if value.kind not in ERROR_DETAILS:
        return value
    detail = text(value.detail)
    return value if detail is value.detail else msgspec.structs.replace(value, detail=detail)


def element(visit: Bytes, text: Text, map_key: str, index: int, record: ElementRecord, *,
            prefix: str = "") -> ElementRecord:
    """A map element's outcome with its result, inputs, error texts, nested step records and
    the outcomes of the maps nested in it visited (`prefix`: the field prefix of an element
    nested in another)."""
    inner = prefix + fields.element(map_key, index)
    result = raw(visit, prefix + fields.element_result(map_key, index), record.result)
    inputs = raw(visit, inner + fields.INPUTS, record.inputs)
    error, rolled = _error(text, record.error), _error(text, record.rollback_error)
    nested = {key: step(visit, text, key, r, prefix=inner) for key, r in record.steps.items()}
    maps = {key: {i: _nested(visit, text, key, i, slot, inner) for i, slot in slots.items()}
            for key, slots in record.maps.items()}
    if (result is record.result and inputs is record.inputs and error is record.error
            and rolled is record.rollback_error
            and all(nested[k] is record.steps[k] for k in nested)
            and all(maps[k][i] is record.maps[k][i] for k in maps for i in maps[k])):
        return record
    return msgspec.structs.replace(record, result=result, inputs=inputs, error=error,
                                   rollback_error=rolled, steps=nested, maps=maps)


def _nested(visit: Bytes, text: Text, map_key: str, index: int, slot: bytes,
            prefix: str) -> bytes:
    """An encoded outcome of a map nested in an element, visited (the same bytes if nothing
    in it changed)."""
    record = records.decode_element(slot)
    again = element(visit, text, map_key, index, record, prefix=prefix)
    return slot if again is record else records.encode(again)
