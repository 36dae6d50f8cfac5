"""Reading a decorated function's signature: which value each parameter receives.

Wiring happens once, at the decorator line, so that a typo fails when the module is imported and
not when a run reaches the step.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Any, assert_never

from reactorflow.errors import DefinitionError
from reactorflow.markers import Input, Outcome, Result, StepContext
from reactorflow.status import HandlerKind


class Source(Enum):
    INPUT = "input"
    RESULT = "result"
    CONTEXT = "context"
    DEFAULT = "default"
    PAYLOAD = "payload"
    ELEMENT = "element"  # a map step's first parameter: one element of the mapped list


class MapRead(StrEnum):
    """How a step reads a map's results (told by its parameter's annotation)."""

    VALUES = "values"  # list[T]: every result, in element order (atomic maps only)
    OUTCOMES = "outcomes"  # list[rf.Outcome[T]]: every element's outcome, in element order
    LAZY = "lazy"  # rf.MapResults[T]: paged from storage on iteration


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a step function and where its value comes from."""

    name: str
    source: Source
    ref: str  # input field or step name; "" for context/default/payload
    path: tuple[str, ...]
    default: Any
    annotation: Any
    outcome: bool = False  # annotated rf.Outcome[T]: receives an async unit's outcome as a value
    map_read: MapRead | None = None  # reads a map step: how (set by the map checks)

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING


@dataclass(frozen=True, slots=True)
class Signature:
    params: tuple[Param, ...]
    return_type: Any


def type_hints(fn: Callable[..., Any], *, where: str, reactor: str) -> dict[str, Any]:
    """Resolve annotations (string ones too) in the function's own module.

    Raises:
        DefinitionError: a name in a string annotation is not a global of that module.
    """
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        module = getattr(fn, "__module__", None) or "its module"
        qualname = getattr(fn, "__qualname__", "")
        enclosing = qualname.rpartition(".<locals>.")[0]
        name = getattr(fn, "__name__", "it")
        local = (f" {name!r} is declared inside {enclosing}(): a class defined there is not "
                 "visible to it." if enclosing else "")
        raise DefinitionError(
            f"{where}: cannot resolve the annotation {exc.name!r}. String annotations (as with "
            f"`from __future__ import annotations`) resolve in the module's globals ({module})."
            f"{local} Define or import {exc.name!r} at module level, before this decorator",
            reactor=reactor,
        ) from exc


def ensure_async(fn: object, *, where: str, reactor: str) -> None:
    if not callable(fn):
        raise DefinitionError(f"{where}: expected an async function, got {fn!r}", reactor=reactor)
    if not inspect.iscoroutinefunction(fn):
        raise DefinitionError(
            f"{where}: {getattr(fn, '__name__', fn)!r} must be declared with `async def`",
            reactor=reactor,
        )


def split_annotated(annotation: Any) -> tuple[Any, list[Any]]:
    """`Annotated[T, *extras]` as (T, extras); any other annotation as (it, [])."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        return base, extras
    return annotation, []


def _check_plain_parameter(param: inspect.Parameter, where: str, reactor: str) -> None:
    if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise DefinitionError(
            f"{where}: *args/**kwargs parameters cannot be wired; name each value as a parameter",
            reactor=reactor,
        )
    if param.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise DefinitionError(
            f"{where}: positional-only parameter {param.name!r} cannot be wired by name",
            reactor=reactor,
        )


def wire_signature(
    fn: Callable[..., Any],
    *,
    reactor: str,
    step: str,
    inputs: Sequence[str],
    steps: Sequence[str],
    payload: bool = False,
    element: bool = False,
) -> Signature:
    """Resolve every parameter of a step (or interrupt) function to its source.

    A name resolves against the reactor's input fields and the steps declared before this one.
    Unknown and ambiguous names raise `DefinitionError` listing what is available. With
    `element=True` (a map step) the first parameter receives one element and is not wired.
    """
    where = f"step {step!r} of reactor {reactor!r}"
    hints = type_hints(fn, where=where, reactor=reactor)
    declared = list(inspect.signature(fn).parameters.values())
    if payload and not any(p.name == "payload" for p in declared):
        _no_payload(declared, hints, where, reactor, step, inputs, steps)
    params: list[Param] = []
    for index, p in enumerate(declared):
        _check_plain_parameter(p, where, reactor)
        annotation = hints.get(p.name, Any)
        base, extras = split_annotated(annotation)
        if element and index == 0:
            params.append(Param(p.name, Source.ELEMENT, "", (), MISSING, base))
            continue
        markers = [m for m in extras if isinstance(m, Input | Result)]
        default = MISSING if p.default is inspect.Parameter.empty else p.default
        if base is StepContext:
            params.append(Param(p.name, Source.CONTEXT, "", (), default, base))
            continue
        if payload and p.name == "payload":
            if annotation is Any:
                raise DefinitionError(
                    f"{where}: the `payload` parameter needs an annotation: it is the payload's "
                    "schema (for example a msgspec.Struct)",
                    reactor=reactor,
                    step=step,
                )
            params.append(Param(p.name, Source.PAYLOAD, "", (), default, base))
            continue
        if len(markers) > 1:
            raise DefinitionError(
                f"{where}: parameter {p.name!r} has more than one rf.Input/rf.Result marker",
                reactor=reactor,
                step=step,
            )
        if markers:
            param = _explicit(p.name, markers[0], base, default, where, reactor, step, inputs,
                              steps)
        else:
            param = _by_name(p.name, base, default, where, reactor, step, inputs, steps)
        if base is Outcome or typing.get_origin(base) is Outcome:
            if param.source is not Source.RESULT:
                raise DefinitionError(
                    f"{where}: parameter {p.name!r} is annotated rf.Outcome but reads no step",
                    reactor=reactor, step=step,
                )
            param = replace(param, outcome=True)
        params.append(param)
    return Signature(tuple(params), hints.get("return", Any))


def _no_payload(declared: Sequence[inspect.Parameter], hints: dict[str, Any], where: str,
                reactor: str, step: str, inputs: Sequence[str], steps: Sequence[str]) -> None:
    """Refuse an interrupt function without a `payload` parameter, before its other parameters
    are wired (one of them is most likely the payload under another name: say so).

    Raises:
        DefinitionError: always.
    """
    def unwired(p: inspect.Parameter) -> bool:
        base, extras = split_annotated(hints.get(p.name, Any))
        return (p.name not in inputs and p.name not in steps and base is not StepContext
                and not any(isinstance(m, Input | Result) for m in extras)
                and p.default is inspect.Parameter.empty)

    candidates = [p.name for p in declared if unwired(p)]
    hint = (f" Its parameter {candidates[0]!r} matches no input and no earlier step: if it is "
            "meant to receive the payload, rename it `payload`." if candidates else "")
    listed = ", ".join(p.name for p in declared) or "none"
    raise DefinitionError(
        f"{where}: an interrupt needs a `payload` parameter whose annotation is the payload "
        f"schema (for example `payload: Approval`); its parameters are: {listed}.{hint}",
        reactor=reactor,
        step=step,
    )


def _available(inputs: Sequence[str], steps: Sequence[str]) -> str:
    shown_inputs = ", ".join(inputs) if inputs else "none"
    shown_steps = ", ".join(steps) if steps else "none"
    return f"inputs: {shown_inputs}; steps declared before it: {shown_steps}"


def _explicit(
    name: str,
    marker: Input | Result,
    base: Any,
    default: Any,
    where: str,
    reactor: str,
    step: str,
    inputs: Sequence[str],
    steps: Sequence[str],
) -> Param:
    if isinstance(marker, Input):
        if marker.name not in inputs:
            raise DefinitionError(
                f"{where}: parameter {name!r} asks for rf.Input({marker.name!r}), which is not an "
                f"input ({_available(inputs, steps)})",
                reactor=reactor,
                step=step,
            )
        return Param(name, Source.INPUT, marker.name, marker.path, default, base)
    if marker.step not in steps:
        raise DefinitionError(
            f"{where}: parameter {name!r} asks for rf.Result({marker.step!r}), which is not a step "
            f"declared before it ({_available(inputs, steps)})",
            reactor=reactor,
            step=step,
        )
    return Param(name, Source.RESULT, marker.step, marker.path, default, base)


def _by_name(
    name: str,
    base: Any,
    default: Any,
    where: str,
    reactor: str,
    step: str,
    inputs: Sequence[str],
    steps: Sequence[str],
) -> Param:
    is_input = name in inputs
    is_step = name in steps
    if is_input and is_step:
        raise DefinitionError(
            f"{where}: parameter {name!r} is ambiguous: it is both an input and a step. Say which "
            f"with Annotated[..., rf.Input({name!r})] or Annotated[..., rf.Result({name!r})]",
            reactor=reactor,
            step=step,
        )
    if is_input:
        return Param(name, Source.INPUT, name, (), default, base)
    if is_step:
        return Param(name, Source.RESULT, name, (), default, base)
    if default is not MISSING:
        return Param(name, Source.DEFAULT, "", (), default, base)
    raise DefinitionError(
        f"{where}: parameter {name!r} matches no input and no earlier step "
        f"({_available(inputs, steps)}). Rename it, give it a default, or mark its source with "
        "rf.Input/rf.Result",
        reactor=reactor,
        step=step,
    )


@dataclass(frozen=True, slots=True)
class HandlerSignature:
    """An undo/compensate handler: first positional slot, then a subset of the step's params."""

    fn: Callable[..., Any]
    names: tuple[str, ...]  # step parameter names it wants, by keyword
    context_name: str | None


def wire_handler(
    fn: Callable[..., Any],
    *,
    kind: HandlerKind,
    reactor: str,
    step: str,
    step_params: Sequence[Param],
) -> HandlerSignature:
    """Check an undo/compensate handler against its step's parameters."""
    where = f"{kind} handler {getattr(fn, '__name__', fn)!r} of step {step!r}"
    ensure_async(fn, where=where, reactor=reactor)
    hints = type_hints(fn, where=where, reactor=reactor)
    sig = list(inspect.signature(fn).parameters.values())
    first_label = handler_receives(kind)
    if not sig or sig[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise DefinitionError(
            f"{where}: the first parameter must be positional: it receives {first_label}",
            reactor=reactor,
            step=step,
        )
    own = {p.name for p in step_params if p.source is not Source.CONTEXT}
    names: list[str] = []
    context_name: str | None = None
    for p in sig[1:]:
        _check_plain_parameter(p, where, reactor)
        base, _ = split_annotated(hints.get(p.name, Any))
        if base is StepContext:
            context_name = p.name
        elif p.name in own:
            names.append(p.name)
        elif p.default is inspect.Parameter.empty:
            listed = ", ".join(sorted(own)) or "none"
            raise DefinitionError(
                f"{where}: parameter {p.name!r} is not a parameter of step {step!r} "
                f"(available: {listed}, or one annotated rf.StepContext)",
                reactor=reactor,
                step=step,
            )
    return HandlerSignature(fn, tuple(names), context_name)


def handler_receives(kind: HandlerKind) -> str:
    """What a handler of that kind receives in its first parameter."""
    match kind:
        case HandlerKind.UNDO:
            return "its result"
        case HandlerKind.COMPENSATE:
            return "the failure"
        case HandlerKind.UNDO_ALL:
            return "the iterator of the map's results"
        case _:
            assert_never(kind)


def wire_subset(
    fn: Callable[..., Any],
    *,
    what: str,
    reactor: str,
    step: str,
    available: Sequence[str],
) -> tuple[str, ...]:
    """A callable (such as `when=`) that takes any subset of the step's arguments by keyword."""
    if not callable(fn):
        raise DefinitionError(f"{what} of step {step!r} must be callable, got {fn!r}",
                              reactor=reactor, step=step)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"{what} of step {step!r}: cannot read its signature",
                              reactor=reactor, step=step) from exc
    names: list[str] = []
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            return tuple(available)
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if p.name in available:
            names.append(p.name)
        elif p.default is inspect.Parameter.empty:
            listed = ", ".join(available) or "none"
            raise DefinitionError(
                f"{what} of step {step!r}: parameter {p.name!r} is not one of the step's "
                f"arguments ({listed})",
                reactor=reactor,
                step=step,
            )
    return tuple(names)
