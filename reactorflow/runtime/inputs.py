"""Validating a reactor's inputs with msgspec, before anything is stored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow.errors import InputValidationError

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

_PATH = re.compile(r"^(?P<reason>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


def split_validation_error(error: msgspec.ValidationError) -> tuple[str, str]:
    """msgspec's message as (field path, reason): "Expected `int`, got `str` - at `$.a`"."""
    match = _PATH.match(str(error))
    assert match is not None
    path = (match.group("path") or "").lstrip(".")
    return path or "(the whole value)", match.group("reason")


def validate_inputs(reactor: Reactor, value: Any) -> Any:
    """Convert `value` (a mapping, or an instance of the inputs type) to the inputs type."""
    inputs_type = reactor.inputs
    if inputs_type is None:
        if value is None or (isinstance(value, Mapping) and not value):
            return None
        raise InputValidationError(
            reactor.name, ", ".join(value) if isinstance(value, Mapping) else "(inputs)",
            "this reactor declares no inputs (pass inputs=YourStruct to rf.Reactor to add some)",
        )
    if isinstance(value, inputs_type) and not isinstance(value, Mapping):
        value = msgspec.to_builtins(value)
    elif not isinstance(value, Mapping):
        raise InputValidationError(
            reactor.name, "(inputs)",
            f"expected keyword arguments or a {inputs_type.__name__}, got "
            f"{type(value).__name__}",
        )
    try:
        return msgspec.convert(value, type=inputs_type)
    except msgspec.ValidationError as exc:
        field, reason = split_validation_error(exc)
        raise InputValidationError(reactor.name, field, reason) from exc
