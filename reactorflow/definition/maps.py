"""Checks of a `map_step` declaration and of the steps that read a map, each raising
`DefinitionError` at the decorator line (api.md §4 "Maps")."""

from __future__ import annotations

import collections.abc
import typing
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, assert_never

import msgspec

from reactorflow import pydantic_types
from reactorflow.definition import checks
from reactorflow.definition.graph import plan_for
from reactorflow.definition.params import (
    HandlerSignature,
    MapRead,
    Param,
    Source,
    wire_handler,
)
from reactorflow.definition.specs import MAX_CHUNK, MapOptions, StepKind
from reactorflow.definition.table import StepSpec
from reactorflow.errors import DefinitionError
from reactorflow.mapresults import MapResults
from reactorflow.markers import Outcome
from reactorflow.status import HandlerKind

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared, StepTable

_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)


def map_options(owner: StepTable, raw: dict[str, Any], params: Sequence[Param],
                return_type: Any, where: str, step: str) -> MapOptions:
    """Validate `map_step`'s own options; the element parameter is the first one."""
    name = owner.name
    batch_size = raw["batch_size"]
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise DefinitionError(f"{where}: batch_size={batch_size!r} must be a whole number >= 1 "
                              "(the most elements running or enqueued at once)",
                              reactor=name, step=step)
    for flag in ("fan_out", "atomic"):
        if not isinstance(raw[flag], bool):
            raise DefinitionError(f"{where}: {flag}={raw[flag]!r} must be True or False",
                                  reactor=name, step=step)
    chunk_size = _chunk_size(raw, batch_size, where, name, step)
    if not params or params[0].source is not Source.ELEMENT:
        raise DefinitionError(f"{where}: a map step's first parameter receives one element; "
                              "declare at least that one", reactor=name, step=step)
    over = raw["over"]
    over_name = getattr(over, "name", over)
    if not isinstance(over_name, str):
        raise DefinitionError(f"{where}: over={over!r} must name an input field or an earlier "
                              "step", reactor=name, step=step)
    over_is_step = _check_over(owner, over_name, where, step)
    child: Declared | None = raw["reactor"]
    element_type = return_type
    if child is not None:
        check_element_reactor(owner, child, where, step)
        element_type = plan_for(child).value_type
    return MapOptions(over=over_name, over_is_step=over_is_step, element=params[0].name,
                      batch_size=batch_size, fan_out=raw["fan_out"], atomic=raw["atomic"],
                      element_type=element_type, chunk_size=chunk_size)


def _chunk_size(raw: dict[str, Any], batch_size: int, where: str, reactor: str,
                step: str) -> int | None:
    """`chunk_size`: None, or a whole number from 1 to `batch_size` (and `MAX_CHUNK`) on a
    fanned-out map (a chunk is one worker job's share of the `batch_size` window)."""
    chunk_size = raw.get("chunk_size")
    if chunk_size is None:
        return None
    most = min(batch_size, MAX_CHUNK)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not (
            1 <= chunk_size <= most):
        raise DefinitionError(f"{where}: chunk_size={chunk_size!r} must be a whole number from "
                              f"1 to {most} (batch_size, at most {MAX_CHUNK}): the elements one "
                              "worker job carries, within the map's window", reactor=reactor,
                              step=step)
    if not raw["fan_out"]:
        raise DefinitionError(f"{where}: chunk_size={chunk_size!r} applies to a fanned-out map "
                              "only (its elements' worker jobs); pass fan_out=True or drop "
                              "chunk_size", reactor=reactor, step=step)
    return chunk_size


def _check_over(owner: StepTable, over: str, where: str, step: str) -> bool:
    """`over` names an input field or an earlier step whose value is a list/tuple; True if a
    step."""
    name = owner.name
    listed = (f"inputs: {', '.join(owner.input_names) or 'none'}; steps declared before it: "
              f"{', '.join(owner.steps) or 'none'}")
    if over in owner.input_names:
        assert owner.inputs is not None
        if pydantic_types.is_model_type(owner.inputs):
            declared = msgspec.inspect.type_info(owner.inputs.model_fields[over].annotation)
        else:
            info = msgspec.inspect.type_info(owner.inputs)
            declared = next(f for f in getattr(info, "fields", ()) if f.name == over).type
        ok = isinstance(declared, msgspec.inspect.ListType | msgspec.inspect.TupleType
                        | msgspec.inspect.VarTupleType | msgspec.inspect.AnyType)
        if not ok:
            raise DefinitionError(f"{where}: over={over!r} is an input field that is not a list "
                                  f"or tuple ({declared!r})", reactor=name, step=step)
        return False
    spec = owner.steps.get(over)
    if spec is None:
        raise DefinitionError(f"{where}: over={over!r} names no input field and no step "
                              f"declared before it ({listed})", reactor=name, step=step)
    result = _result_type(spec)
    origin = typing.get_origin(result) or result
    if result is not Any and origin not in _SEQUENCES:
        raise DefinitionError(f"{where}: over={over!r} names step {over!r}, whose result "
                              f"({result!r}) is not a list or tuple", reactor=name, step=step)
    return True


def _result_type(spec: StepSpec) -> Any:
    """The type of the value a step gives its readers (what a map over it maps over)."""
    match spec.kind:
        case StepKind.MAP:
            return list
        case StepKind.COMPOSE | StepKind.ASYNC_REACTOR:  # the child's value
            assert spec.child is not None
            return plan_for(spec.child).value_type
        case StepKind.STEP | StepKind.ASYNC_STEP | StepKind.INTERRUPT | StepKind.SLEEP:
            return spec.return_type
        case _:
            assert_never(spec.kind)


def check_element_reactor(owner: StepTable, child: Declared, where: str, step: str) -> None:
    """An element reactor (a `rf.Reactor`, checked by `map_step`) has no interrupt and no sleep
    anywhere in it and does not nest its owner (a map, an async step and an async reactor inside
    it run in the element: `runtime.maps.element_run`)."""
    if child.table is owner or owner in {r.table for r in checks.composed_tree(child)}:
        raise DefinitionError(f"{where}: reactor={child.name!r} would nest reactor "
                              f"{owner.name!r} inside itself", reactor=owner.name, step=step)
    for reactor in (child, *checks.composed_tree(child)):
        for spec in reactor.steps.values():
            if spec.kind is StepKind.INTERRUPT:
                raise DefinitionError(
                    f"{where}: element reactor {child.name!r} has an interrupt "
                    f"({reactor.name}.{spec.name}); a map element cannot pause its run. Move the "
                    "interrupt out of the element reactor", reactor=owner.name, step=step)
            if spec.kind is StepKind.SLEEP:
                raise DefinitionError(
                    f"{where}: element reactor {child.name!r} has a sleep "
                    f"({reactor.name}.{spec.name}); a map element cannot park its run. Move the "
                    "sleep out of the element reactor (before or after the map)",
                    reactor=owner.name, step=step)


def read_kind(annotation: Any) -> MapRead:
    """How a parameter annotated `annotation` reads a map."""
    base = typing.get_origin(annotation) or annotation
    if base is MapResults:
        return MapRead.LAZY
    if base in (list, collections.abc.Sequence):
        args = typing.get_args(annotation)
        if args and (typing.get_origin(args[0]) or args[0]) is Outcome:
            return MapRead.OUTCOMES
    return MapRead.VALUES


def wire_readers(owner: StepTable, params: Sequence[Param], where: str,
                 step: str) -> tuple[Param, ...]:
    """Mark the parameters that read a map with how they read it; a plain `list[T]` reader of
    a non-atomic map is refused."""
    wired: list[Param] = []
    for param in params:
        spec = owner.steps.get(param.ref) if param.source is Source.RESULT else None
        if spec is None or spec.map is None:
            wired.append(param)
            continue
        kind = read_kind(param.annotation)
        if kind is MapRead.VALUES and not spec.map.atomic:
            raise DefinitionError(
                f"{where}: parameter {param.name!r} reads the non-atomic map {param.ref!r} as a "
                "plain list, but some of its elements may have failed: annotate it "
                "list[rf.Outcome[T]] or rf.MapResults[T]", reactor=owner.name, step=step)
        wired.append(replace(param, map_read=kind))
    return tuple(wired)


def wire_undo_all(fn: Callable[..., Any], spec: StepSpec, reactor: str) -> HandlerSignature:
    """`undo_all` takes the results iterator first, then non-element parameters of its map."""
    others = [p for p in spec.params if p.source is not Source.ELEMENT]
    return wire_handler(fn, kind=HandlerKind.UNDO_ALL, reactor=reactor, step=spec.name,
                        step_params=others)
