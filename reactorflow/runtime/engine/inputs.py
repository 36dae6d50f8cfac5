"""Validating a reactor's inputs (before anything is stored) and a composed child's inputs
against the declared inputs type, by the rules of `definition.conformance`; a rejection is an
`InputValidationError` naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reactorflow.definition.conformance import Rejected, conform, is_instance
from reactorflow.errors import InputValidationError

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared


def validate_inputs(reactor: Declared, value: Any, *, step: str | None = None) -> Any:
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
