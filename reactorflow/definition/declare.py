"""How `rf.Reactor`'s decorators record a step in its `StepTable`: validate the options, wire
the parameters, and store an immutable `StepSpec` (no I/O, no tasks); and how handlers attach
to a step. The front (`reactor.py`) makes the handle (`rf.Step`) from what is recorded here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, assert_never

from reactorflow.definition import checks, maps, naming
from reactorflow.definition.gate_secrets import param_masks
from reactorflow.definition.gates import bind
from reactorflow.definition.params import (
    Source,
    ensure_async,
    wire_handler,
    wire_signature,
    wire_subset,
)
from reactorflow.definition.specs import UNIT_KINDS, StepKind
from reactorflow.definition.table import Declared, StepSpec, StepTable
from reactorflow.definition.typematch import check_param_types
from reactorflow.errors import DefinitionError
from reactorflow.retry import Retry
from reactorflow.status import HandlerKind


def record_step(reactor: StepTable, fn: Any, kind: StepKind, *, name: str | None,
                retries: Retry | None = None, timeout: float | None = None,
                when: Callable[..., Any] | None = None, after: Sequence[str] = (),
                interrupt: dict[str, Any] | None = None,
                child: Declared | None = None,
                mapping: dict[str, Any] | None = None,
                gates: Sequence[Any] = (), on_failure: str | None = None) -> StepSpec:
    """Validate and record one step in `reactor`'s table; its record.

    Args:
        reactor: The declaring reactor's step table.
        fn: The step's function.
        kind: The step's kind.
        name: The step's name (`None`: the function's).
        retries: A retry policy.
        timeout: Seconds per attempt.
        when: A predicate wired like a step.
        after: Ordering-only dependencies, by name (the front resolves `rf.Step` handles).
        interrupt: An interrupt's raw options.
        child: The composed, async or element child reactor.
        mapping: A map's raw options.
        gates: The step's gates.
        on_failure: What its failure does to the run (`None`: the reactor's policy).

    Raises:
        DefinitionError: A bad name or option, naming the reactor, the step and the field.
    """
    step_name = name if name is not None else getattr(fn, "__name__", None)
    where = f"{kind.value} {step_name!r} of reactor {reactor.name!r}"
    ensure_async(fn, where=where, reactor=reactor.name)
    assert step_name is not None
    check_step_name(reactor, step_name)
    checks.check_retries(retries, where, reactor.name, step_name)
    seconds = checks.check_seconds(timeout, "timeout", where, reactor.name, step_name)
    signature = wire_signature(fn, reactor=reactor.name, step=step_name,
                               inputs=reactor.input_names, steps=list(reactor.steps),
                               payload=kind is StepKind.INTERRUPT,
                               element=kind is StepKind.MAP)
    for param in signature.params:
        if param.outcome and reactor.steps[param.ref].kind not in UNIT_KINDS:
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
    # a sleep's value is the moment it woke for, whatever its body's annotation (a timedelta,
    # seconds or a datetime: what the body returns is checked when it runs)
    return_type = datetime if kind is StepKind.SLEEP else signature.return_type
    if kind not in (StepKind.COMPOSE, StepKind.ASYNC_REACTOR) and child is None:
        checks.check_storable(return_type, where, reactor.name, step_name)
    if step_name == reactor.returns and kind in UNIT_KINDS:
        raise DefinitionError(
            f"{where}: this reactor has returns={step_name!r}, but an async unit may still "
            "be running when the run ends; read it in a plain step and return that one",
            reactor=reactor.name, step=step_name)
    deps = tuple(dict.fromkeys([*data_deps, *after_names]))
    bound = bind(gates, where=where, available=arg_names, reactor=reactor.name, step=step_name,
                 secrets=param_masks(reactor.inputs, _return_types(reactor), signature.params)
                 if gates else None)
    options = None
    if interrupt is not None:
        options = checks.interrupt_options(reactor, interrupt, params, where,
                                           step_name, arg_names, deps)
    spec = StepSpec(
        name=step_name, kind=kind, fn=fn, params=params,
        return_type=return_type, deps=deps,
        after=after_names, retry=retries, timeout=seconds, when=when,
        when_names=when_names, interrupt=options, child=child, map=map_options,
        gates=bound, on_failure=None if on_failure is None else checks.failure_policy(
            on_failure, where, reactor.name, step_name),
    )
    reactor.put(spec)
    naming.bump()
    return spec

def _return_types(reactor: StepTable) -> dict[str, Any]:
    return {name: spec.return_type for name, spec in reactor.steps.items()}


def check_step_name(reactor: StepTable, step_name: str) -> None:
    if not checks.STEP_NAME.match(step_name):
        raise DefinitionError(
            f"reactor {reactor.name!r}: step name {step_name!r} must start with a letter or '_' "
            "and contain only letters, digits, '_' and '-'",
            reactor=reactor.name, step=step_name,
        )
    if step_name in reactor.steps:
        raise DefinitionError(
            f"reactor {reactor.name!r} already has a step named {step_name!r} (steps: "
            f"{', '.join(reactor.steps)}); give this one another name with name=...",
            reactor=reactor.name, step=step_name,
        )
    if step_name in reactor.input_names:
        raise DefinitionError(
            f"reactor {reactor.name!r}: step name {step_name!r} is also an input field; steps "
            "and inputs share one namespace for wiring, so rename the step",
            reactor=reactor.name, step=step_name,
        )

def check_after(reactor: StepTable, after: Sequence[str], where: str,
                step_name: str) -> tuple[str, ...]:
    names: list[str] = []
    for ref in after:
        if ref not in reactor.steps:
            listed = ", ".join(reactor.steps) or "none"
            raise DefinitionError(
                f"{where}: after={ref!r} is not a step declared before it (steps: {listed})",
                reactor=reactor.name, step=step_name,
            )
        names.append(ref)
    return tuple(names)

def attach_handler(reactor: StepTable, step_name: str, kind: HandlerKind,
                   fn: Callable[..., Any]) -> None:
    """Attach an `undo`, `compensate` or `undo_all` handler to a declared step.

    Args:
        reactor: The declaring reactor's step table.
        step_name: The step.
        kind: Which handler: undo, compensate or (a map's) undo_all.
        fn: The handler.

    Raises:
        DefinitionError: The step cannot take that handler, or already has one.
    """
    spec = reactor.steps[step_name]
    match kind:
        case HandlerKind.UNDO_ALL:
            _attach_undo_all(reactor, spec, fn)
            return
        case HandlerKind.UNDO:
            current = spec.undo
        case HandlerKind.COMPENSATE:
            current = spec.compensate
        case _:
            assert_never(kind)
    if current is not None:
        raise DefinitionError(
            f"step {step_name!r} of reactor {reactor.name!r} already has a {kind} handler",
            reactor=reactor.name, step=step_name,
        )
    if spec.map is not None and spec.child is not None:
        raise DefinitionError(
            f"map {step_name!r} of reactor {reactor.name!r} runs an element reactor, which "
            f"rolls back its own steps: it takes no {kind} handler",
            reactor=reactor.name, step=step_name)
    if kind is HandlerKind.UNDO and spec.map is not None and spec.map.undo_all is not None:
        raise DefinitionError(
            f"map {step_name!r} of reactor {reactor.name!r} already has an undo_all handler; "
            "a map is undone either per element (undo) or in bulk (undo_all), not both",
            reactor=reactor.name, step=step_name)
    allowed = spec.kind in (StepKind.STEP, StepKind.MAP) or (
        spec.kind is StepKind.ASYNC_STEP and kind is HandlerKind.COMPENSATE)
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
    if kind is HandlerKind.UNDO:
        reactor.put(replace(spec, undo=handler))
    else:
        reactor.put(replace(spec, compensate=handler))
    naming.bump()

def _attach_undo_all(reactor: StepTable, spec: StepSpec, fn: Callable[..., Any]) -> None:
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
    reactor.put(replace(spec, map=replace(spec.map, undo_all=handler)))
    naming.bump()
