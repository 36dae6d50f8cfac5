"""Immutable records of what was declared. Runtime state never lives here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from reactorflow.definition.gates import BoundGate
from reactorflow.definition.params import HandlerSignature, Param
from reactorflow.retry import Retry

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor


class StepKind(StrEnum):
    STEP = "step"
    INTERRUPT = "interrupt"
    COMPOSE = "compose"
    ASYNC_STEP = "async_step"
    ASYNC_REACTOR = "async_reactor"
    MAP = "map"


UNIT_KINDS = frozenset({StepKind.ASYNC_STEP, StepKind.ASYNC_REACTOR})
"""Kinds that run as async units: in a worker, while their run goes on."""

ResumeMode = Literal["inline", "background"]


@dataclass(frozen=True, slots=True)
class InterruptOptions:
    payload_type: Any
    correlation_id: str | Callable[..., str] | None
    correlation_names: tuple[str, ...]  # parameters a callable correlation id takes
    timeout: float | None
    max_attempts: int | None
    resume: ResumeMode


@dataclass(frozen=True, slots=True)
class MapOptions:
    """What `map_step` declared beyond a plain step's options."""

    over: str  # the input field or earlier step whose list is mapped
    over_is_step: bool
    element: str  # the function's first parameter: it receives one element
    batch_size: int
    fan_out: bool
    atomic: bool
    element_type: Any  # the element result's type (the child's value type with reactor=)
    undo_all: HandlerSignature | None = None


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
    child: Reactor | None = field(default=None, compare=False)
    map: MapOptions | None = None
    gates: tuple[BoundGate, ...] = ()
