"""Validation of declarations: each check raises `DefinitionError` naming what is wrong and what
is available, so a mistake fails at the decorator line."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import pydantic_types
from reactorflow.definition.conformance import Rejected, conform
from reactorflow.definition.params import Param, Source, wire_subset
from reactorflow.definition.specs import FailurePolicy, InterruptOptions, OnTimeout
from reactorflow.errors import DefinitionError
from reactorflow.retry import Retry

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared, StepTable

STEP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
REACTOR_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


def version(value: Any, where: str, reactor: str) -> int:
    """A declared version: a whole number >= 1 (`bool` is not one).

    Raises:
        DefinitionError: anything else, naming `where`.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DefinitionError(f"{where}={value!r} must be a whole number >= 1 (versions "
                              "count up from 1)", reactor=reactor)
    return value


def failure_policy(value: Any, where: str, reactor: str,
                   step: str | None = None) -> FailurePolicy:
    """An `on_failure=` option: "rollback" or "hold".

    Raises:
        DefinitionError: anything else, naming `where`.
    """
    try:
        return FailurePolicy(value)
    except ValueError:
        raise DefinitionError(f"{where}: on_failure={value!r} must be \"rollback\" (undo what "
                              "completed and end failed) or \"hold\" (keep it and end held, for "
                              "an operator to retry_step, skip_step or undo)", reactor=reactor,
                              step=step) from None


def input_fields(inputs: type | None, reactor: str) -> tuple[str, ...]:
    """The field names of an inputs type (msgspec.Struct, dataclass, TypedDict or pydantic
    model).

    Raises:
        DefinitionError: it is no type with named fields, or a model that cannot be stored.
    """
    if inputs is None:
        return ()
    if pydantic_types.is_model_type(inputs):
        check_model(inputs, f"reactor {reactor!r}: inputs={inputs.__name__}", reactor, "")
        return tuple(inputs.model_fields)
    try:
        info = msgspec.inspect.type_info(inputs)
    except Exception as exc:  # msgspec raises TypeError for unsupported types
        raise DefinitionError(
            f"reactor {reactor!r}: inputs={inputs!r} is not a type msgspec can validate; use a "
            "msgspec.Struct, a dataclass, a TypedDict or a pydantic model",
            reactor=reactor,
        ) from exc
    fields = getattr(info, "fields", None)
    if fields is None:
        raise DefinitionError(
            f"reactor {reactor!r}: inputs={inputs!r} must be a msgspec.Struct, a dataclass or a "
            "TypedDict (a type with named fields)",
            reactor=reactor,
        )
    return tuple(f.name for f in fields)


def check_seconds(value: Any, label: str, where: str, reactor: str, step: str) -> float | None:
    """A duration option as seconds: a number of seconds or a `datetime.timedelta`, > 0.

    Raises:
        DefinitionError: another type, or a duration of zero or less (naming the option and
            the value).
    """
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        given = f"{value!r} ({seconds:g} s)" if isinstance(value, timedelta) else repr(value)
        raise DefinitionError(f"{where}: {label}={given} must be seconds > 0 or a positive "
                              "datetime.timedelta", reactor=reactor, step=step)
    return float(seconds)


def check_retries(retries: Any, where: str, reactor: str, step: str) -> Retry | None:
    if retries is not None and not isinstance(retries, Retry):
        raise DefinitionError(
            f"{where}: retries={retries!r} must be rf.Retry(...), e.g. "
            "retries=rf.Retry(attempts=3)",
            reactor=reactor, step=step,
        )
    return retries


def custom_classes(info: msgspec.inspect.Type, seen: set[int] | None = None) -> list[type]:
    """Classes inside a type that msgspec does not know natively (`object` counts as Any)."""
    seen = set() if seen is None else seen
    if id(info) in seen:
        return []
    seen.add(id(info))
    if isinstance(info, msgspec.inspect.CustomType):
        return [] if info.cls is object else [info.cls]
    found: list[type] = []
    for attr in ("item_type", "key_type", "value_type"):
        inner = getattr(info, attr, None)
        if isinstance(inner, msgspec.inspect.Type):
            found += custom_classes(inner, seen)
    for inner in (*getattr(info, "item_types", ()), *getattr(info, "types", ())):
        found += custom_classes(inner, seen)
    for f in getattr(info, "fields", ()):
        found += custom_classes(f.type, seen)
    return found


def check_model(model: Any, where: str, reactor: str, step: str) -> None:
    """A pydantic model must round-trip through JSON: every field of a type with a JSON form.

    Raises:
        DefinitionError: naming the field that cannot (an arbitrary type).
    """
    found = pydantic_types.unstorable(model)
    if found is not None:
        field, why = found
        raise DefinitionError(
            f"{where}: the pydantic model {model.__name__} cannot be stored: its field {field!r} "
            f"cannot round-trip through JSON ({why}). Give it a JSON-serializable type (builtins, "
            "a model, a msgspec.Struct, ...) or leave it out of the model",
            reactor=reactor, step=step or None,
        )


def check_storable(return_type: Any, where: str, reactor: str, step: str) -> None:
    """msgspec must decode the type, natively (no custom classes but pydantic models whose
    fields round-trip).

    Raises:
        DefinitionError: the type cannot be stored (a model: naming its field).
    """
    try:
        msgspec.msgpack.Decoder(return_type)
        custom = custom_classes(msgspec.inspect.type_info(return_type))
    except (TypeError, ValueError) as exc:
        custom = [exc]  # type: ignore[list-item]
    models = [cls for cls in custom if pydantic_types.is_model_type(cls)]
    if len(models) < len(custom):
        raise DefinitionError(
            f"{where}: its return annotation {return_type!r} cannot be stored: annotate a type "
            "msgspec can encode (builtins, msgspec.Struct, dataclass, TypedDict, pydantic "
            "model, ...)",
            reactor=reactor, step=step,
        )
    for model in models:
        check_model(model, where, reactor, step)


def composed_tree(reactor: Declared | StepTable) -> set[Declared]:
    """Every reactor nested in `reactor` through compose (transitively)."""
    seen: set[Declared] = set()
    stack: list[Declared | StepTable] = [reactor]
    while stack:
        current = stack.pop()
        for spec in current.steps.values():
            if spec.child is not None and spec.child not in seen:
                seen.add(spec.child)
                stack.append(spec.child)
    return seen


def interrupt_options(
    reactor: StepTable,
    raw: dict[str, Any],
    params: Sequence[Param],
    where: str,
    step: str,
    arg_names: Sequence[str],
    deps: Sequence[str],
) -> InterruptOptions:
    name = reactor.name
    payload_type = next(p.annotation for p in params if p.source is Source.PAYLOAD)
    try:
        custom = custom_classes(msgspec.inspect.type_info(payload_type))
        for model in (cls for cls in custom if pydantic_types.is_model_type(cls)):
            check_model(model, where, name, step)
        pydantic_types.json_schema(payload_type)
        msgspec.msgpack.Decoder(payload_type)
    except (TypeError, ValueError) as exc:
        raise DefinitionError(
            f"{where}: the payload annotation {payload_type!r} is not a schema msgspec can "
            "validate; use a msgspec.Struct, a dataclass, a TypedDict, a pydantic model or "
            "builtins",
            reactor=name, step=step,
        ) from exc
    timeout = check_seconds(raw["timeout"], "timeout", where, name, step)
    max_attempts, resume = raw["max_attempts"], raw["resume"]
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
    ):
        raise DefinitionError(
            f"{where}: max_attempts={max_attempts!r} must be a whole number >= 1 or None",
            reactor=name, step=step,
        )
    if resume not in ("inline", "background"):
        raise DefinitionError(f"{where}: resume={resume!r} must be 'inline' or 'background'",
                              reactor=name, step=step)
    correlation: str | Callable[..., str] | None = raw["correlation_id"]
    names: tuple[str, ...] = ()
    if isinstance(correlation, str):
        check_template(reactor, correlation, where, step, deps)
    elif correlation is not None:
        names = wire_subset(correlation, what="correlation_id=", reactor=name, step=step,
                            available=arg_names)
    on_timeout = check_on_timeout(raw["on_timeout"], payload_type, timeout, where, name, step,
                                  arg_names)
    return InterruptOptions(payload_type, correlation, names, timeout, max_attempts, resume,
                            on_timeout)


def check_on_timeout(value: Any, payload_type: Any, timeout: float | None, where: str,
                     reactor: str, step: str, arg_names: Sequence[str]) -> OnTimeout | None:
    """An interrupt's `on_timeout=`: a payload, conformed to `payload_type` now, or a callable
    wired like `when=` over the interrupt's other arguments (`arg_names`: inputs and steps it
    reads, never `payload`), whose value is conformed when the deadline fires.

    Raises:
        DefinitionError: without `timeout=`, a class instead of a value, a payload that does
            not conform (naming the field), or a callable's parameter that names none of
            `arg_names`.
    """
    if value is None:
        return None
    if timeout is None:
        raise DefinitionError(
            f"{where}: on_timeout needs timeout= (the deadline at which the interrupt is "
            "resumed with it); give timeout=seconds or a datetime.timedelta",
            reactor=reactor, step=step)
    if isinstance(value, type):
        raise DefinitionError(
            f"{where}: on_timeout={value.__name__} is a class; give the payload itself (e.g. "
            f"{value.__name__}(...)) or a function that returns one", reactor=reactor, step=step)
    if callable(value):
        try:
            names = wire_subset(value, what="on_timeout=", reactor=reactor, step=step,
                                available=arg_names)
        except DefinitionError as exc:
            raise DefinitionError(
                f"{where}: {exc.message}; on_timeout= computes the payload from the "
                "interrupt's other arguments (never the payload itself)",
                reactor=reactor, step=step) from None
        return OnTimeout(compute=value, names=names)
    try:
        payload = conform(value, payload_type)
    except Rejected as exc:
        schema = getattr(payload_type, "__name__", None) or repr(payload_type)
        raise DefinitionError(
            f"{where}: on_timeout= (a {type(value).__name__}) is not a valid payload of this "
            f"interrupt (schema {schema}): {exc.field}: {exc.reason}",
            reactor=reactor, step=step) from None
    return OnTimeout(payload=payload)


def check_template(reactor: StepTable, template: str, where: str, step: str,
                   deps: Sequence[str]) -> None:
    """A correlation-id template may name inputs and the steps the interrupt waits for."""
    known = set(reactor.input_names) | set(deps)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise DefinitionError(f"{where}: correlation_id template {template!r}: {exc}",
                              reactor=reactor.name, step=step) from exc
    for _, field, _, _ in parsed:
        if field is None:
            continue
        root = re.split(r"[.\[]", field, maxsplit=1)[0]
        if root not in known:
            raise DefinitionError(
                f"{where}: correlation_id template {template!r} names {root!r}, which is neither "
                f"an input ({', '.join(reactor.input_names) or 'none'}) nor a step this interrupt "
                f"waits for ({', '.join(deps) or 'none'}); take that step as a parameter or list "
                "it in after=",
                reactor=reactor.name, step=step,
            )
