"""Markers users put in annotations, and the step context injected into steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from reactorflow.records import RunError

T = TypeVar("T")


def _split_path(path: str | None) -> tuple[str, ...]:
    if path is None or path == "":
        return ()
    return tuple(path.split("."))


@dataclass(frozen=True, slots=True, init=False)
class Input:
    """`Annotated[str, rf.Input("order_id")]`: take a reactor input (optionally a path into it)."""

    name: str
    path: tuple[str, ...]

    def __init__(self, name: str, path: str | None = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "path", _split_path(path))


@dataclass(frozen=True, slots=True, init=False)
class Result:
    """`Annotated[str, rf.Result("charge", "charge_id")]`: take a step's result, or a path into it.

    A path is dotted: `"address.city"`, `"lines.0.sku"` (a number indexes a list).
    """

    step: str
    path: tuple[str, ...]

    def __init__(self, step: str, path: str | None = None) -> None:
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "path", _split_path(path))


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step knows about its own execution; declare a parameter annotated `rf.StepContext`.

    `idempotency_key` is the same on every retry and every re-run of this step of this run (for
    example after a crash), so pass it to the systems the step calls.
    """

    run_id: str
    reactor: str
    step: str
    attempt: int
    idempotency_key: str


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What a step annotated `rf.Outcome[T]` receives from an async unit it reads: success or
    failure as a value (`ok`, `value`, `error`), instead of failing when the unit failed."""

    ok: bool
    value: T | None = None
    error: RunError | None = None


def follow_path(value: Any, path: tuple[str, ...]) -> Any:
    """Walk a dotted path into mappings, sequences and attributes."""
    for segment in path:
        if isinstance(value, dict):
            value = value[segment]
        elif isinstance(value, list | tuple) and segment.lstrip("-").isdigit():
            value = value[int(segment)]
        else:
            value = getattr(value, segment)
    return value
