"""How `rf.Reactor`'s decorators record a step: validate the options, wire the parameters,
and store an immutable `StepSpec` (no I/O, no tasks); and how handlers attach to a step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reactorflow.definition import checks, maps, registry
from reactorflow.definition.gate_secrets import param_masks
from reactorflow.definition.gates import bind
from reactorflow.definition.handles import MapStep, Step
from reactorflow.definition.params import (
    Source,
    ensure_async,
    wire_handler,
    wire_signature,
    wire_subset,
)
from reactorflow.definition.specs import UNIT_KINDS, StepKind, StepSpec
from reactorflow.definition.typematch import check_param_types
from reactorflow.errors import DefinitionError
from reactorflow.retry import Retry

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

After = Sequence[str | Step[Any, Any]]


def record_step(reactor: Reactor, fn: Any, kind: StepKind, *, name: str | None,
             retries: Retry | None = None, timeout: float | None = None,
             when: Callable[..., Any] | None = None, after: After = (),
             interrupt: dict[str, Any] | None = None,
             child: Reactor | None = None,
             mapping: dict[str, Any] | None = None,
             gates: Sequence[Any] = ()) -> Step[Any, Any]:
    step_name = name if name is not None else getattr(fn, "__name__", None)
    where = f"{kind.value} {step_name!r} of reactor {reactor.name!r}"
    ensure_async(fn, where=where, reactor=reactor.name)
    assert step_name is not None
    check_step_name(reactor, step_name)
    checks.check_retries(retries, where, reactor.name, step_name)
    seconds = checks.check_seconds(timeout, "timeout", where, reactor.name, step_name)
    signature = wire_signature(fn, reactor=reactor.name, step=step_name,
                               inputs=reactor.input_names, steps=list(reactor._steps),
                               payload=kind is StepKind.INTERRUPT,
                               element=kind is StepKind.MAP)
    for param in signature.params:
        if param.outcome and reactor._steps[param.ref].kind not in UNIT_KINDS:
            raise DefinitionError(
                f"{where}: parameter {param.name!r} is annotated rf.Outcome but "
                f"{param.ref!r} is not an async_step or async_reactor", reactor=reactor.name,
                step=step_name)
    params = maps.wire_readers(reactor, signature.params, where, step_name)
    map_options = None
    if mapping is not None:
        map_options = maps.map_options(reactor, mapping, params, signature.return_type, where,
                                       step_name)
    check_param_types(reactor, params, where, step_name,
                      over=map_options.over if map_options is not None else None)
    after_names = check_after(reactor, after, where, step_name)
    data_deps = [p.ref for p in params if p.source is Source.RESULT]
    if map_options is not None and map_options.over_is_step:
        data_deps.insert(0, map_options.over)
    arg_names = [p.name for p in params
                 if p.source not in (Source.CONTEXT, Source.PAYLOAD, Source.ELEMENT)]
    when_names: tuple[str, ...] = ()
    if when is not None:
        when_names = wire_subset(when, what="when=", reactor=reactor.name, step=step_name,
                                  available=arg_names)
    if kind not in (StepKind.COMPOSE, StepKind.ASYNC_REACTOR) and child is None:
        checks.check_storable(signature.return_type, where, reactor.name, step_name)
    if step_name == reactor.returns and kind in UNIT_KINDS:
        raise DefinitionError(
            f"{where}: this reactor has returns={step_name!r}, but an async unit may still "
            "be running when the run ends; read it in a plain step and return that one",
            reactor=reactor.name, step=step_name)
    deps = tuple(dict.fromkeys([*data_deps, *after_names]))
    bound = bind(gates, where=where, available=arg_names, reactor=reactor.name, step=step_name,
                 secrets=param_masks(reactor, signature.params) if gates else None)
    options = None
    if interrupt is not None:
        options = checks.interrupt_options(reactor, interrupt, params, where,
                                           step_name, arg_names, deps)
    reactor._steps[step_name] = StepSpec(
        name=step_name, kind=kind, fn=fn, params=params,
        return_type=signature.return_type, deps=deps,
        after=after_names, retry=retries, timeout=seconds, when=when,
        when_names=when_names, interrupt=options, child=child, map=map_options,
        gates=bound,
    )
    registry.bump()
    if map_options is not None:
        return MapStep(reactor, step_name, fn)
    return Step(reactor, step_name, fn)

def check_step_name(reactor: Reactor, step_name: str) -> None:
    if not checks.STEP_NAME.match(step_name):
        raise DefinitionError(
            f"reactor {reactor.name!r}: step name {step_name!r} must start with a letter or '_' "
            "and contain only letters, digits, '_' and '-'",
            reactor=reactor.name, step=step_name,
        )
    if step_name in reactor._steps:
        raise DefinitionError(
            f"reactor {reactor.name!r} already has a step named {step_name!r} (steps: "
            f"{', '.join(reactor._steps)}); give this one another name with name=...",
            reactor=reactor.name, step=step_name,
        )
    if step_name in reactor.input_names:
        raise DefinitionError(
            f"reactor {reactor.name!r}: step name {step_name!r} is also an input field; steps "
            "and inputs share one namespace for wiring, so rename the step",
            reactor=reactor.name, step=step_name,
        )

def check_after(reactor: Reactor, after: After | str | Step[Any, Any], where: str,
                 step_name: str) -> tuple[str, ...]:
    items = [after] if isinstance(after, str | Step) else list(after)
    names: list[str] = []
    for item in items:
        ref = item.name if isinstance(item, Step) else item
        if ref not in reactor._steps:
            listed = ", ".join(reactor._steps) or "none"
            raise DefinitionError(
                f"{where}: after={ref!r} is not a step declared before it (steps: {listed})",
                reactor=reactor.name, step=step_name,
            )
        names.append(ref)
    return tuple(names)

def attach_handler(reactor: Reactor, step_name: str, kind: str, fn: Callable[..., Any]) -> None:
    spec = reactor._steps[step_name]
    if kind == "undo_all":
        _attach_undo_all(reactor, spec, fn)
        return
    if getattr(spec, kind) is not None:
        raise DefinitionError(
            f"step {step_name!r} of reactor {reactor.name!r} already has a {kind} handler",
            reactor=reactor.name, step=step_name,
        )
    if spec.map is not None and spec.child is not None:
        raise DefinitionError(
            f"map {step_name!r} of reactor {reactor.name!r} runs an element reactor, which "
            f"rolls back its own steps: it takes no {kind} handler",
            reactor=reactor.name, step=step_name)
    if kind == "undo" and spec.map is not None and spec.map.undo_all is not None:
        raise DefinitionError(
            f"map {step_name!r} of reactor {reactor.name!r} already has an undo_all handler; "
            "a map is undone either per element (undo) or in bulk (undo_all), not both",
            reactor=reactor.name, step=step_name)
    allowed = spec.kind in (StepKind.STEP, StepKind.MAP) or (
        spec.kind is StepKind.ASYNC_STEP and kind == "compensate")
    if not allowed:
        reason = ("a run's rollback never undoes an async unit (it compensates itself when "
                  "it fails)" if spec.kind is StepKind.ASYNC_STEP
                  else "only plain steps have them (a child rolls back its own steps)")
        raise DefinitionError(
            f"{spec.kind.value} {step_name!r} of reactor {reactor.name!r} cannot take a {kind} "
            f"handler: {reason}",
            reactor=reactor.name, step=step_name,
        )
    handler = wire_handler(fn, kind=kind, reactor=reactor.name, step=step_name,
                           step_params=spec.params)
    if kind == "undo":
        reactor._steps[step_name] = replace(spec, undo=handler)
    else:
        reactor._steps[step_name] = replace(spec, compensate=handler)
    registry.bump()

def _attach_undo_all(reactor: Reactor, spec: StepSpec, fn: Callable[..., Any]) -> None:
    assert spec.map is not None
    where = f"map {spec.name!r} of reactor {reactor.name!r}"
    if spec.child is not None:
        raise DefinitionError(f"{where} runs an element reactor, which rolls back its own "
                              "steps: it takes no undo_all handler",
                              reactor=reactor.name, step=spec.name)
    if spec.map.undo_all is not None:
        raise DefinitionError(f"{where} already has an undo_all handler",
                              reactor=reactor.name, step=spec.name)
    if spec.undo is not None:
        raise DefinitionError(
            f"{where} already has an undo handler; a map is undone either per element "
            "(undo) or in bulk (undo_all), not both", reactor=reactor.name, step=spec.name)
    handler = maps.wire_undo_all(fn, spec, reactor.name)
    reactor._steps[spec.name] = replace(spec, map=replace(spec.map, undo_all=handler))
    registry.bump()
