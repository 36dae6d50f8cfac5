"""The step table: what one reactor declared, kept apart from the `rf.Reactor` front.

`StepSpec` is one row (an immutable record of a declared step); `StepTable` holds a reactor's
rows in declaration order, its hand-off point and its compiled plan, and is the only thing the
declaration helpers (`declare`, `checks`, `maps`, `graph`, ...) write into. A composed or
element child is seen through `Declared`: what the definition layer and the engine read of a
reactor, which `rf.Reactor` provides. Nothing here knows `Reactor` itself, so the helpers and
the front import one way: `reactor.py` -> helpers -> `table.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from reactorflow.definition.gates import BoundGate
from reactorflow.definition.params import HandlerSignature, Param
from reactorflow.definition.specs import (
    UNIT_KINDS,
    FailurePolicy,
    InterruptOptions,
    MapOptions,
    StepKind,
)
from reactorflow.retry import Retry

if TYPE_CHECKING:
    from reactorflow.middleware import Middleware

Handoff = tuple[Literal["after", "before"], str]


class Declared(Protocol):
    """A reactor as the definition layer and the engine read it (`rf.Reactor` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def on_failure(self) -> FailurePolicy: ...

    @property
    def hold_timeout(self) -> float | None: ...

    @property
    def subject(self) -> str | None: ...

    @property
    def table(self) -> StepTable: ...

    @property
    def inputs(self) -> type | None: ...

    @property
    def input_names(self) -> tuple[str, ...]: ...

    @property
    def steps(self) -> Mapping[str, StepSpec]: ...

    @property
    def value_step(self) -> str | None: ...

    @property
    def handoff(self) -> Handoff | None: ...

    @property
    def max_concurrency(self) -> int | None: ...

    @property
    def middleware(self) -> tuple[Middleware, ...]: ...

    @property
    def gates(self) -> tuple[BoundGate, ...]: ...


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One declared step: its function, wiring and policies."""

    name: str
    kind: StepKind
    fn: Callable[..., Any]
    params: tuple[Param, ...]
    return_type: Any
    deps: tuple[str, ...]  # every step this waits for: data dependencies then `after=`
    after: tuple[str, ...]
    retry: Retry | None = None
    timeout: float | None = None
    when: Callable[..., Any] | None = None
    when_names: tuple[str, ...] = ()
    undo: HandlerSignature | None = None
    compensate: HandlerSignature | None = None
    interrupt: InterruptOptions | None = None
    child: Declared | None = field(default=None, compare=False)
    map: MapOptions | None = None
    gates: tuple[BoundGate, ...] = ()
    on_failure: FailurePolicy | None = None  # None: the run's reactor's policy


class StepTable:
    """One reactor's declared steps (in declaration order), hand-off point and plan cache.

    Args:
        name: The reactor's name (for messages).
        inputs: The reactor's inputs type, or `None`.
        input_names: The inputs' field names.
        returns: The step named by `returns=`, or `None`.
    """

    __slots__ = ("_steps", "handoff", "input_names", "inputs", "name", "plan_cache", "returns")

    def __init__(self, name: str, inputs: type | None, input_names: tuple[str, ...],
                 returns: str | None) -> None:
        self.name = name
        self.inputs = inputs
        self.input_names = input_names
        self.returns = returns
        self.handoff: Handoff | None = None
        self.plan_cache: tuple[int, object] | None = None  # (generation, Plan): graph.plan_for
        self._steps: dict[str, StepSpec] = {}

    @property
    def steps(self) -> Mapping[str, StepSpec]:
        """The declared steps, in declaration order (read-only)."""
        return MappingProxyType(self._steps)

    @property
    def value_step(self) -> str | None:
        """`returns=`, else the last declared step that runs in the run itself (async units
        are skipped: they may end later)."""
        if self.returns is not None:
            return self.returns
        return next((name for name in reversed(self._steps)
                     if self._steps[name].kind not in UNIT_KINDS), None)

    def put(self, spec: StepSpec) -> None:
        """Record `spec`: a new step (appended) or a new version of a declared one (in place).

        Args:
            spec: The step's record.
        """
        self._steps[spec.name] = spec
