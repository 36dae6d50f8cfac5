"""Replacing a declared step's function (the test kit's `override` and crash points).

The step keeps its declaration (name, wiring, policies, handlers); only the function the engine
calls changes. A replacement offered by a user is checked like a declaration: it must be an
`async def` whose parameters resolve to the same sources as the original's, and whose return
annotation (if any) is the original's.

A step is named by its key in the runs of the reactor given: its own name, or the dotted path
into a composed child that `run.steps` and the history use (`"ship.book_courier"`: step
`book_courier` of the reactor composed as `ship`). `resolve` finds the reactor that declares it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reactorflow.definition import naming
from reactorflow.definition.params import (
    Source,
    ensure_async,
    split_annotated,
    type_hints,
    wire_signature,
)
from reactorflow.definition.specs import StepKind
from reactorflow.errors import DefinitionError
from reactorflow.markers import StepContext

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared, StepSpec

_REPLACEABLE = frozenset({StepKind.STEP, StepKind.ASYNC_STEP, StepKind.INTERRUPT, StepKind.MAP,
                          StepKind.SLEEP})


def resolve(reactor: Declared, path: str) -> tuple[Declared, str]:
    """The reactor that declares the step at `path` in `reactor`'s runs, and its own name.

    Args:
        reactor: the reactor the path starts at.
        path: a step's name, or a dotted key through composed children ("ship.book_courier").

    Raises:
        DefinitionError: a part of the path names no composed step (the error names the path,
            the part and what it could be).
    """
    *levels, name = path.split(".")
    owner = reactor
    for depth, part in enumerate(levels):
        spec = owner.steps.get(part)
        if spec is None or spec.kind is not StepKind.COMPOSE or spec.child is None:
            composed = [n for n, s in owner.steps.items() if s.kind is StepKind.COMPOSE]
            where = ".".join(levels[:depth]) or "the reactor itself"
            raise DefinitionError(
                f"reactor {reactor.name!r} has no step at {path!r}: {part!r} (in "
                f"{where}, reactor {owner.name!r}) is not a composed step (composed steps: "
                f"{', '.join(composed) or 'none'}); name a child's step by its key, e.g. "
                f"'<composed step>.<child step>'", reactor=reactor.name, step=path)
        owner = spec.child
    if name not in owner.steps:
        raise DefinitionError(
            f"reactor {reactor.name!r} has no step at {path!r}: reactor {owner.name!r} has no "
            f"step {name!r} (steps: {', '.join(owner.steps) or 'none'})", reactor=reactor.name,
            step=path)
    return owner, name


def declared(reactor: Declared, step: str) -> StepSpec:
    """The spec of `step` of `reactor`, if its function can be replaced.

    Raises:
        DefinitionError: no such step, or a step without a function of its own (a composed
            reactor).
    """
    spec = reactor.steps.get(step)
    if spec is None:
        raise DefinitionError(f"reactor {reactor.name!r} has no step {step!r} (steps: "
                              f"{', '.join(reactor.steps) or 'none'})", reactor=reactor.name,
                              step=step)
    if spec.kind not in _REPLACEABLE:
        raise DefinitionError(f"{spec.kind.value} {step!r} of reactor {reactor.name!r} has no "
                              "function of its own to replace; replace a step of the composed "
                              "reactor instead", reactor=reactor.name, step=step)
    return spec


def check_body(reactor: Declared, step: str, fn: Callable[..., Any]) -> None:
    """Check that `fn` may stand in for `step`'s function.

    Args:
        reactor: the reactor that declares the step.
        step: the step's name.
        fn: the replacement.

    Raises:
        DefinitionError: `fn` is not an `async def`, its parameters differ from the step's
            (names or what they receive), or it is annotated to return another type.
    """
    spec = declared(reactor, step)
    where = f"the replacement of {spec.kind.value} {step!r} of reactor {reactor.name!r}"
    ensure_async(fn, where=where, reactor=reactor.name)
    _check_context(spec, fn, where, reactor.name)
    names = list(reactor.steps)
    signature = wire_signature(fn, reactor=reactor.name, step=step,
                               inputs=reactor.input_names, steps=names[:names.index(step)],
                               payload=spec.kind is StepKind.INTERRUPT,
                               element=spec.kind is StepKind.MAP)
    wanted = {p.name: (p.source, p.ref) for p in spec.params}
    offered = {p.name: (p.source, p.ref) for p in signature.params}
    if offered != wanted:
        raise DefinitionError(
            f"{where}: its parameters ({', '.join(offered) or 'none'}) must be the step's "
            f"({', '.join(wanted) or 'none'}), receiving the same values", reactor=reactor.name,
            step=step)
    annotated = getattr(fn, "__annotations__", {}).get("return")
    if annotated is not None and signature.return_type != spec.return_type:
        raise DefinitionError(
            f"{where}: it returns {signature.return_type!r} but the step is declared to return "
            f"{spec.return_type!r}; return the same type (or leave the return unannotated)",
            reactor=reactor.name, step=step)


def _check_context(spec: StepSpec, fn: Callable[..., Any], where: str, reactor: str) -> None:
    """A parameter that receives the step context in the step must be annotated
    `rf.StepContext` in the replacement too (it is wired by that annotation, not by name).

    Raises:
        DefinitionError: naming the parameter and the annotation it needs.
    """
    hints = type_hints(fn, where=where, reactor=reactor)
    offered = inspect.signature(fn).parameters
    for param in spec.params:
        if param.source is not Source.CONTEXT or param.name not in offered:
            continue
        annotation = hints.get(param.name)
        if split_annotated(annotation)[0] is not StepContext:
            shown = "no annotation" if annotation is None else f"the annotation {annotation!r}"
            raise DefinitionError(
                f"{where}: parameter {param.name!r} receives the step context in the step, but "
                f"the replacement gives it {shown}; annotate it `{param.name}: rf.StepContext` "
                "(the context is wired by that annotation, not by the name)",
                reactor=reactor, step=spec.name)


def swap_body(reactor: Declared, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Make the engine call `fn` for `step` (unchecked: see `check_body`); returns the function
    it replaces, to put back with another `swap_body`."""
    spec = declared(reactor, step)
    reactor.table.put(replace(spec, fn=fn))
    naming.bump()  # compiled plans hold the spec: they are built again
    return spec.fn
