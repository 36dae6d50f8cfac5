"""Immutable records of what was declared (a step's row, `StepSpec`, is in `table`). Runtime
state never lives here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from reactorflow.definition.params import HandlerSignature


class FailurePolicy(StrEnum):
    """What a step's failure (after its last attempt) does to its run: `ROLLBACK`, the saga
    (undo what completed, end `failed`), or `HOLD` (keep it, end `held` for an operator)."""

    ROLLBACK = "rollback"
    HOLD = "hold"


class StepKind(StrEnum):
    STEP = "step"
    INTERRUPT = "interrupt"
    COMPOSE = "compose"
    ASYNC_STEP = "async_step"
    ASYNC_REACTOR = "async_reactor"
    MAP = "map"
    SLEEP = "sleep"  # the run waits until the deadline its body returns, holding nothing


UNIT_KINDS = frozenset({StepKind.ASYNC_STEP, StepKind.ASYNC_REACTOR})
"""Kinds that run as async units: in a worker, while their run goes on."""

ResumeMode = Literal["inline", "background"]


@dataclass(frozen=True, slots=True)
class OnTimeout:
    """An interrupt's `on_timeout=`: the payload it is resumed with at its deadline. Either
    `payload` (conformed to the payload's schema at declaration) or `compute`, a callable (sync
    or async) taking the interrupt's other arguments named in `names`, whose value is conformed
    when the deadline fires."""

    payload: Any = None
    compute: Callable[..., Any] | None = None
    names: tuple[str, ...] = ()  # the interrupt's arguments a `compute` takes


@dataclass(frozen=True, slots=True)
class InterruptOptions:
    payload_type: Any
    correlation_id: str | Callable[..., str] | None
    correlation_names: tuple[str, ...]  # parameters a callable correlation id takes
    timeout: float | None
    max_attempts: int | None
    resume: ResumeMode
    on_timeout: OnTimeout | None = None  # None: the deadline fails the run (InterruptExpired)


MAX_CHUNK = 1024
"""The most elements one worker job of a fanned-out map carries (a chunk; `chunk_size`)."""


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
    chunk_size: int | None = None  # fan-out: elements per job (None: sized from their cost)
