"""`rf.Reactor`: the declaration of a workflow, and the handle users run it through.

Decorators here only validate and record. Running is delegated to `reactorflow.runtime`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, overload

import msgspec

from reactorflow.definition import registry
from reactorflow.definition.handles import Step
from reactorflow.definition.params import (
    Source,
    ensure_async,
    wire_handler,
    wire_signature,
    wire_subset,
)
from reactorflow.definition.specs import InterruptOptions, ResumeMode, StepKind, StepSpec
from reactorflow.errors import DefinitionError
from reactorflow.retry import Retry

if TYPE_CHECKING:
    from reactorflow.definition.graph import Plan
    from reactorflow.middleware import Middleware
    from reactorflow.snapshot import Run, RunPage

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
StepFn = Callable[P, Coroutine[Any, Any, R]]


class StepDecorator(Protocol):
    """What a called decorator (`@flow.step(...)`) returns."""

    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> Step[P, R]: ...
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_REACTOR_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


def input_fields(inputs: type | None, reactor: str) -> tuple[str, ...]:
    """The field names of an inputs type (msgspec.Struct, dataclass or TypedDict)."""
    if inputs is None:
        return ()
    try:
        info = msgspec.inspect.type_info(inputs)
    except Exception as exc:  # msgspec raises TypeError for unsupported types
        raise DefinitionError(
            f"reactor {reactor!r}: inputs={inputs!r} is not a type msgspec can validate; use a "
            "msgspec.Struct, a dataclass or a TypedDict",
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


class Reactor:
    """A workflow: steps wired by parameter name into a graph, run as a saga.

    `name` is the reactor's durable identity (stored with every run) and must be unique among
    the reactors alive in a process.
    """

    def __init__(
        self,
        name: str,
        *,
        inputs: type | None = None,
        returns: str | None = None,
        max_concurrency: int | None = None,
        middleware: Sequence[Middleware] = (),
    ) -> None:
        if not isinstance(name, str) or not _REACTOR_NAME.match(name):
            raise DefinitionError(
                f"reactor name {name!r} must be a non-empty string of letters, digits, '_', '-', "
                "'.' or ':'"
            )
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool)
            or not isinstance(max_concurrency, int)
            or max_concurrency < 1
        ):
            raise DefinitionError(
                f"reactor {name!r}: max_concurrency={max_concurrency!r} must be a whole number "
                ">= 1, or None for no limit",
                reactor=name,
            )
        if returns is not None and not isinstance(returns, str):
            raise DefinitionError(
                f"reactor {name!r}: returns={returns!r} must be a step name", reactor=name
            )
        self.name = name
        self.inputs = inputs
        self.input_names = input_fields(inputs, name)
        self.returns = returns
        self.max_concurrency = max_concurrency
        self.middleware = tuple(middleware)
        self._steps: dict[str, StepSpec] = {}
        self._plan_cache: tuple[int, Plan] | None = None
        registry.register(self)

    # -- introspection -------------------------------------------------------------------------

    @property
    def steps(self) -> Mapping[str, StepSpec]:
        """The declared steps, in declaration order."""
        return MappingProxyType(self._steps)

    @property
    def value_step(self) -> str | None:
        """The step whose result is the reactor's value: `returns=`, else the last declared."""
        if self.returns is not None:
            return self.returns
        return next(reversed(self._steps), None)

    def to_mermaid(self) -> str:
        """The reactor's graph as a Mermaid flowchart (composed children as subgraphs)."""
        from reactorflow.definition.mermaid import render

        return render(self)

    def interrupt_schema(self, step: str | Sequence[str]) -> dict[str, Any]:
        """The JSON Schema of an interrupt's payload (a nested one by its path)."""
        from reactorflow.definition.graph import plan_for

        spec = plan_for(self).interrupt_spec(step)
        assert spec.interrupt is not None
        return msgspec.json.schema(spec.interrupt.payload_type)

    def __repr__(self) -> str:
        return f"<Reactor {self.name!r} steps={list(self._steps)}>"

    # -- declaration ---------------------------------------------------------------------------

    @overload
    def step(self, fn: StepFn[P, R], /) -> Step[P, R]: ...
    @overload
    def step(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        retries: Retry | None = None,
        timeout: float | None = None,
        when: Callable[..., Any] | None = None,
        after: Sequence[str | Step[Any, Any]] = (),
    ) -> StepDecorator: ...

    def step(
        self,
        fn: Any = None,
        /,
        *,
        name: str | None = None,
        retries: Retry | None = None,
        timeout: float | None = None,
        when: Callable[..., Any] | None = None,
        after: Sequence[str | Step[Any, Any]] = (),
    ) -> Any:
        """Declare a step. Its parameters name the inputs and earlier steps it needs."""

        def decorate(f: Any) -> Any:
            return self._declare(
                f, StepKind.STEP, name=name, retries=retries, timeout=timeout, when=when,
                after=after,
            )

        return decorate(fn) if fn is not None else decorate

    @overload
    def interrupt(self, fn: StepFn[P, R], /) -> Step[P, R]: ...
    @overload
    def interrupt(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        correlation_id: str | Callable[..., str] | None = None,
        timeout: float | None = None,
        max_attempts: int | None = None,
        resume: ResumeMode = "inline",
        when: Callable[..., Any] | None = None,
        after: Sequence[str | Step[Any, Any]] = (),
    ) -> StepDecorator: ...

    def interrupt(
        self,
        fn: Any = None,
        /,
        *,
        name: str | None = None,
        correlation_id: str | Callable[..., str] | None = None,
        timeout: float | None = None,
        max_attempts: int | None = None,
        resume: ResumeMode = "inline",
        when: Callable[..., Any] | None = None,
        after: Sequence[str | Step[Any, Any]] = (),
    ) -> Any:
        """Declare a pause point: the run waits here for a payload given to `continue_`."""

        def decorate(f: Any) -> Any:
            return self._declare(
                f, StepKind.INTERRUPT, name=name, when=when, after=after,
                interrupt=dict(correlation_id=correlation_id, timeout=timeout,
                               max_attempts=max_attempts, resume=resume),
            )

        return decorate(fn) if fn is not None else decorate

    def compose(
        self,
        child: Reactor,
        *,
        name: str | None = None,
        when: Callable[..., Any] | None = None,
        after: Sequence[str | Step[Any, Any]] = (),
        **unsupported: Any,
    ) -> StepDecorator:
        """Declare a step that runs `child` inline; the function maps arguments to its inputs."""
        if unsupported:
            hint = (
                " A composed child is never retried as a whole: declare retries on its steps."
                if "retries" in unsupported
                else ""
            )
            raise DefinitionError(
                f"reactor {self.name!r}: compose() takes name, when and after; got "
                f"{', '.join(sorted(unsupported))}.{hint}",
                reactor=self.name,
            )
        if not isinstance(child, Reactor):
            raise DefinitionError(
                f"reactor {self.name!r}: compose() needs a rf.Reactor, got {child!r}",
                reactor=self.name,
            )
        if child is self or self in _composed_tree(child):
            raise DefinitionError(
                f"reactor {self.name!r} cannot compose {child.name!r}: that would nest the "
                "reactor inside itself",
                reactor=self.name,
            )

        def decorate(f: Any) -> Any:
            return self._declare(f, StepKind.COMPOSE, name=name, when=when, after=after,
                                 child=child)

        return decorate

    # -- internals -----------------------------------------------------------------------------

    def _declare(
        self,
        fn: Any,
        kind: StepKind,
        *,
        name: str | None,
        retries: Retry | None = None,
        timeout: float | None = None,
        when: Callable[..., Any] | None = None,
        after: Sequence[str | Step[Any, Any]] = (),
        interrupt: dict[str, Any] | None = None,
        child: Reactor | None = None,
    ) -> Step[Any, Any]:
        step_name = name if name is not None else getattr(fn, "__name__", None)
        where = f"{kind.value} {step_name!r} of reactor {self.name!r}"
        ensure_async(fn, where=where, reactor=self.name)
        assert step_name is not None
        self._check_step_name(step_name)
        if retries is not None and not isinstance(retries, Retry):
            raise DefinitionError(
                f"{where}: retries={retries!r} must be rf.Retry(...), e.g. "
                "retries=rf.Retry(attempts=3)",
                reactor=self.name,
                step=step_name,
            )
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise DefinitionError(f"{where}: timeout={timeout!r} must be seconds > 0",
                                  reactor=self.name, step=step_name)
        declared = list(self._steps)
        signature = wire_signature(
            fn, reactor=self.name, step=step_name, inputs=self.input_names, steps=declared,
            payload=kind is StepKind.INTERRUPT,
        )
        after_names = self._check_after(after, where, step_name)
        data_deps = [p.ref for p in signature.params if p.source is Source.RESULT]
        deps = tuple(dict.fromkeys([*data_deps, *after_names]))
        arg_names = [p.name for p in signature.params
                     if p.source not in (Source.CONTEXT, Source.PAYLOAD)]
        when_names: tuple[str, ...] = ()
        if when is not None:
            when_names = wire_subset(when, what="when=", reactor=self.name, step=step_name,
                                     available=arg_names)
        return_type = signature.return_type
        if kind is not StepKind.COMPOSE:
            _check_storable(return_type, where, self.name, step_name)
        options = None
        if interrupt is not None:
            options = self._interrupt_options(interrupt, signature.params, where, step_name,
                                              arg_names)
        spec = StepSpec(
            name=step_name, kind=kind, fn=fn, params=signature.params, return_type=return_type,
            deps=deps, after=after_names, retry=retries, timeout=timeout, when=when,
            when_names=when_names, interrupt=options, child=child,
        )
        self._steps[step_name] = spec
        registry.bump()
        return Step(self, step_name, fn)

    def _check_step_name(self, step_name: str) -> None:
        if not _NAME.match(step_name):
            raise DefinitionError(
                f"reactor {self.name!r}: step name {step_name!r} must start with a letter or '_' "
                "and contain only letters, digits, '_' and '-'",
                reactor=self.name,
                step=step_name,
            )
        if step_name in self._steps:
            raise DefinitionError(
                f"reactor {self.name!r} already has a step named {step_name!r} (steps: "
                f"{', '.join(self._steps)}); give this one another name with name=...",
                reactor=self.name,
                step=step_name,
            )
        if step_name in self.input_names:
            raise DefinitionError(
                f"reactor {self.name!r}: step name {step_name!r} is also an input field; steps "
                "and inputs share one namespace for wiring, so rename the step",
                reactor=self.name,
                step=step_name,
            )

    def _check_after(
        self, after: Sequence[str | Step[Any, Any]], where: str, step_name: str
    ) -> tuple[str, ...]:
        if isinstance(after, str | Step):
            after = [after]
        names: list[str] = []
        for item in after:
            ref = item.name if isinstance(item, Step) else item
            if ref not in self._steps:
                listed = ", ".join(self._steps) or "none"
                raise DefinitionError(
                    f"{where}: after={ref!r} is not a step declared before it (steps: {listed})",
                    reactor=self.name,
                    step=step_name,
                )
            names.append(ref)
        return tuple(names)

    def _interrupt_options(
        self,
        raw: dict[str, Any],
        params: Sequence[Any],
        where: str,
        step_name: str,
        arg_names: Sequence[str],
    ) -> InterruptOptions:
        payload_type = next(p.annotation for p in params if p.source is Source.PAYLOAD)
        try:
            msgspec.json.schema(payload_type)
            msgspec.msgpack.Decoder(payload_type)
        except (TypeError, ValueError) as exc:
            raise DefinitionError(
                f"{where}: the payload annotation {payload_type!r} is not a schema msgspec can "
                "validate; use a msgspec.Struct, a dataclass, a TypedDict or builtins",
                reactor=self.name, step=step_name,
            ) from exc
        timeout, max_attempts, resume = raw["timeout"], raw["max_attempts"], raw["resume"]
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise DefinitionError(f"{where}: timeout={timeout!r} must be seconds > 0",
                                  reactor=self.name, step=step_name)
        if max_attempts is not None and (
            isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
        ):
            raise DefinitionError(
                f"{where}: max_attempts={max_attempts!r} must be a whole number >= 1 or None",
                reactor=self.name, step=step_name,
            )
        if resume not in ("inline", "background"):
            raise DefinitionError(
                f"{where}: resume={resume!r} must be 'inline' or 'background'",
                reactor=self.name, step=step_name,
            )
        correlation = raw["correlation_id"]
        names: tuple[str, ...] = ()
        if isinstance(correlation, str):
            self._check_template(correlation, where, step_name)
        elif correlation is not None:
            names = wire_subset(correlation, what="correlation_id=", reactor=self.name,
                                step=step_name, available=arg_names)
        return InterruptOptions(payload_type, correlation, names,
                                None if timeout is None else float(timeout), max_attempts, resume)

    def _check_template(self, template: str, where: str, step_name: str) -> None:
        known = set(self.input_names) | set(self._steps)
        try:
            parsed = list(string.Formatter().parse(template))
        except ValueError as exc:
            raise DefinitionError(f"{where}: correlation_id template {template!r}: {exc}",
                                  reactor=self.name, step=step_name) from exc
        for _, field, _, _ in parsed:
            if field is None:
                continue
            root = re.split(r"[.\[]", field, maxsplit=1)[0]
            if root not in known:
                raise DefinitionError(
                    f"{where}: correlation_id template {template!r} names {root!r}, which is no "
                    f"input and no earlier step (inputs: {', '.join(self.input_names) or 'none'}; "
                    f"steps: {', '.join(self._steps) or 'none'})",
                    reactor=self.name, step=step_name,
                )

    def _attach_handler(self, step_name: str, kind: str, fn: Callable[..., Any]) -> None:
        spec = self._steps[step_name]
        if getattr(spec, kind) is not None:
            raise DefinitionError(
                f"step {step_name!r} of reactor {self.name!r} already has a {kind} handler",
                reactor=self.name, step=step_name,
            )
        if spec.kind is not StepKind.STEP:
            raise DefinitionError(
                f"{spec.kind.value} {step_name!r} of reactor {self.name!r} cannot take a {kind} "
                "handler: only plain steps have them (a composed child rolls back its own steps)",
                reactor=self.name, step=step_name,
            )
        handler = wire_handler(fn, kind=kind, reactor=self.name, step=step_name,
                               step_params=spec.params)
        if kind == "undo":
            self._steps[step_name] = replace(spec, undo=handler)
        else:
            self._steps[step_name] = replace(spec, compensate=handler)
        registry.bump()

    # -- running (delegated to the runtime) ----------------------------------------------------

    async def run(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
                  **fields: Any) -> Run:
        """Validate the inputs, store the run, execute it here, and return its snapshot."""
        from reactorflow.runtime import operations

        return await operations.start(self, inputs, fields, idempotency_key=idempotency_key)

    async def get(self, run_id: str) -> Run:
        """The run's snapshot as stored (raises `rf.RunNotFound`)."""
        from reactorflow.runtime import operations

        return await operations.get(self, run_id)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Wait (notified, not polled) until the run is terminal or paused."""
        from reactorflow.runtime import operations

        return await operations.wait(self, run_id, timeout=timeout)

    async def undo(self, run_id: str) -> Run:
        """Roll back every completed step of the run (newest first); it ends `cancelled`."""
        from reactorflow.runtime import operations

        return await operations.undo(self, run_id)

    async def cancel(self, run_id: str, *, reason: str = "") -> Run:
        """Stop the run without rollback; a running run stops at its next step boundary."""
        from reactorflow.runtime import operations

        return await operations.cancel(self, run_id, reason=reason)

    async def list_runs(self, *, status: str | None = None, limit: int = 50,
                        cursor: str | None = None) -> RunPage:
        """Runs of this reactor, newest first, a page at a time."""
        from reactorflow.runtime import operations

        return await operations.list_runs(self, status=status, limit=limit, cursor=cursor)

    async def continue_(self, run_id: str, *, step: str | Sequence[str], payload: Any) -> Run:
        """Deliver the payload a paused run waits for at interrupt `step`."""
        from reactorflow.runtime import resume

        return await resume.continue_run(self, run_id, step=step, payload=payload)

    async def continue_by_correlation_id(self, correlation_id: str, *, step: str | Sequence[str],
                                         payload: Any) -> Run:
        """`continue_` for the run that registered this correlation id."""
        from reactorflow.runtime import resume

        return await resume.continue_by_correlation(self, correlation_id, step=step,
                                                    payload=payload)

    async def ready_interrupts(self, run_id: str) -> list[str | tuple[str, ...]]:
        """The interrupts the run waits on: names at the root, paths inside composed children."""
        run = await self.get(run_id)
        return list(run.waiting_on)


def _composed_tree(reactor: Reactor) -> set[Reactor]:
    seen: set[Reactor] = set()
    stack = [reactor]
    while stack:
        current = stack.pop()
        for spec in current.steps.values():
            if spec.child is not None and spec.child not in seen:
                seen.add(spec.child)
                stack.append(spec.child)
    return seen


def _check_storable(return_type: Any, where: str, reactor: str, step: str) -> None:
    """msgspec must both decode the type and know it natively (no custom classes)."""
    try:
        msgspec.msgpack.Decoder(return_type)
        msgspec.json.schema(return_type)
    except (TypeError, ValueError) as exc:
        raise DefinitionError(
            f"{where}: its return annotation {return_type!r} cannot be stored: annotate a type "
            "msgspec can encode (builtins, msgspec.Struct, dataclass, TypedDict, ...)",
            reactor=reactor, step=step,
        ) from exc
