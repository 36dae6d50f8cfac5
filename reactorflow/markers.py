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
    """`Annotated[str, rf.Input("order_id")]`: take a reactor input (optionally a path into it).

    The parameter receives the input field `name`, or the value at the dotted `path` inside it
    (`rf.Input("address", "city")`).

    Args:
        name: The input field.
        path: A dotted path into the field's value (kept as a tuple of parts).
    """

    name: str
    path: tuple[str, ...]

    def __init__(self, name: str, path: str | None = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "path", _split_path(path))


@dataclass(frozen=True, slots=True, init=False)
class Result:
    """`Annotated[str, rf.Result("charge", "charge_id")]`: take a step's result, or a path into it.

    A path is dotted: `"address.city"`, `"lines.0.sku"`; it walks mappings by key, objects by
    attribute and lists by index.

    Args:
        step: The earlier step whose result the parameter receives.
        path: A dotted path into the result (kept as a tuple of parts).
    """

    step: str
    path: tuple[str, ...]

    def __init__(self, step: str, path: str | None = None) -> None:
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "path", _split_path(path))


class Redacted:
    """`Annotated[str, rf.Redacted]` on an input field, a payload field or a step's return type:
    the value is stored and the steps receive it, but every view of the run shows `"***"`
    (snapshots, logs, error text, middleware events, the CLI and the HTTP API).

    Use the class itself (`rf.Redacted`); an instance means the same."""

    __slots__ = ()


def is_redacted(metadata: object) -> bool:
    """Whether an `Annotated` metadata item is the `rf.Redacted` marker."""
    return metadata is Redacted or isinstance(metadata, Redacted)


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step knows about its own execution; declare a parameter annotated `rf.StepContext`.

    `idempotency_key` is the same on every retry and every re-run of this step of this run (for
    example after a crash), so pass it to the systems the step calls. Injected in steps, and in
    undo and compensate handlers.

    Attributes:
        run_id: The run's id.
        reactor: The name of the reactor that declares the step.
        step: The step's key (dotted inside a composed child; `<map>:<index>.<step>` inside a
            map's element reactor).
        attempt: 1 on the first try.
        idempotency_key: `"<run id>:<step key>"`, the same on every retry and re-run (of an
            element: `"<run id>:<map>:<index>"`, and `"<run id>:<map>:<index>.<step>"` for a
            step of its element reactor).
    """

    run_id: str
    reactor: str
    step: str
    attempt: int
    idempotency_key: str


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What a step annotated `rf.Outcome[T]` receives from an async unit it reads: success or
    failure as a value, instead of failing with `rf.AsyncUnitFailed` when the unit failed.

    Annotating a parameter that reads anything but an async unit `rf.Outcome` is a
    `DefinitionError`. See [Workers](workers.md#async-steps).

    Attributes:
        ok: The unit succeeded.
        value: The unit's result (a `T`) when `ok`, else `None`.
        error: An `rf.RunError` naming the unit when not `ok`, else `None`.
    """

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
