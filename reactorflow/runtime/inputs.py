"""Validating a value against a declared type with msgspec: a reactor's inputs (before anything is
stored), a composed child's inputs, an interrupt's payload.

A declared type is a msgspec.Struct, a dataclass or a TypedDict (a payload may also be builtins).
The same rules hold everywhere a type is taken:

1. An instance of the type itself is turned back into builtins, so that it is validated like
   any other value (its constraints hold).
2. A mapping given for a type with named fields may name only those fields: an unknown field is
   refused, naming it and listing the fields (msgspec's `forbid_unknown_fields` semantics).
3. msgspec converts the value; its error is split into the field path and the reason, and a
   missing field is reported under its own name.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow.errors import InputValidationError

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

WHOLE = "(the whole value)"
_PATH = re.compile(r"^(?P<reason>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]*)`$")


class Rejected(Exception):  # internal: always turned into a ReactorflowError
    """A value failed validation: the field path and the reason (never escapes this package)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def split_validation_error(error: msgspec.ValidationError) -> tuple[str, str]:
    """msgspec's message as (field path, reason): "Expected `int`, got `str` - at `$.a`"; a
    missing field is named itself ("Object missing required field `b` - at `$.a`" -> a.b)."""
    match = _PATH.match(str(error))
    assert match is not None
    path = (match.group("path") or "").lstrip(".")
    reason = match.group("reason")
    missing = _MISSING.match(reason)
    if missing is not None:
        name = missing.group("name")
        return (f"{path}.{name}" if path else name), "a required field is missing"
    return path or WHOLE, reason


@functools.lru_cache(maxsize=256)
def field_names(schema: Any) -> tuple[str, ...] | None:
    """The field names of a Struct, dataclass or TypedDict (as given in a mapping); None for
    any other type."""
    try:
        info = msgspec.inspect.type_info(schema)
    except (TypeError, ValueError):
        return None
    fields = getattr(info, "fields", None)
    if fields is None:
        return None
    return tuple(f.encode_name for f in fields)


def is_instance(value: Any, schema: Any) -> bool:
    """`value` is a Struct or dataclass instance of `schema` (never an isinstance on a TypedDict
    or a generic alias, which raise TypeError)."""
    if not isinstance(value, msgspec.Struct) and not (
            dataclasses.is_dataclass(value) and not isinstance(value, type)):
        return False
    try:
        return isinstance(schema, type) and issubclass(type(value), schema)
    except TypeError:
        return False


def conform(value: Any, schema: Any) -> Any:
    """`value` converted to `schema` by the rules in this module's docstring.

    Raises:
        Rejected: the value does not fit (its field path and the reason).
    """
    if is_instance(value, schema):
        value = msgspec.to_builtins(value)
    names = field_names(schema)
    if names is not None and isinstance(value, Mapping):
        unknown = [str(key) for key in value if key not in names]
        if unknown:
            label = "an unknown field" if len(unknown) == 1 else "unknown fields"
            raise Rejected(", ".join(unknown),
                           f"{label}; the fields are: {', '.join(names) or 'none'}")
    try:
        return msgspec.convert(value, type=schema)
    except msgspec.ValidationError as exc:
        raise Rejected(*split_validation_error(exc)) from exc


def validate_inputs(reactor: Reactor, value: Any, *, step: str | None = None) -> Any:
    """Convert `value` (a mapping, or an instance of the inputs type) to the inputs type.

    Args:
        reactor: the reactor whose inputs these are.
        value: keyword arguments as a mapping, or an instance of `reactor.inputs`.
        step: for a child's inputs, the step of the parent run that mapped them.

    Raises:
        InputValidationError: naming the field and the reason.
    """
    inputs_type = reactor.inputs
    if inputs_type is None:
        if value is None or (isinstance(value, Mapping) and not value):
            return None
        raise InputValidationError(
            reactor.name, ", ".join(value) if isinstance(value, Mapping) else "(inputs)",
            "this reactor declares no inputs (pass inputs=YourStruct to rf.Reactor to add some)",
            step=step,
        )
    if not isinstance(value, Mapping) and not is_instance(value, inputs_type):
        raise InputValidationError(
            reactor.name, "(inputs)",
            f"expected keyword arguments or a {inputs_type.__name__}, got "
            f"{type(value).__name__}", step=step,
        )
    try:
        return conform(value, inputs_type)
    except Rejected as exc:
        raise InputValidationError(reactor.name, exc.field, exc.reason, step=step) from exc
