"""What a step decorator returns: still the plain async function, plus `.undo`/`.compensate`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from reactorflow.definition.declare import attach_handler
from reactorflow.status import HandlerKind

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared, StepSpec

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


class Step(Generic[P, R]):
    """A declared step, as returned by `@flow.step` and the other step decorators.

    Awaiting a call runs the plain function (no engine), for unit tests.

    Args:
        fn: The step's function.

    Attributes:
        reactor: The reactor that declares the step.
        name: The step's name.
    """

    __slots__ = ("__dict__", "_fn", "name", "reactor")

    def __init__(self, reactor: Declared, name: str,
                 fn: Callable[P, Coroutine[Any, Any, R]]) -> None:
        self.reactor = reactor
        self.name = name
        self._fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self._fn(*args, **kwargs)

    @property
    def spec(self) -> StepSpec:
        """The step's current declaration (handlers included)."""
        return self.reactor.steps[self.name]

    def undo(self, fn: F) -> F:
        """Declare what undoes this step after it succeeded: `@step.undo`.

        Args:
            fn: The handler, an `async def`; its parameters wire like the step's, plus
                the step's result as the first argument.

        Returns:
            `fn` itself (the decorator records, it does not wrap).

        Raises:
            DefinitionError: The handler's parameters cannot be wired, or one is declared twice.
        """
        attach_handler(self.reactor.table, self.name, HandlerKind.UNDO, fn)
        return fn

    def compensate(self, fn: F) -> F:
        """Declare what cleans up when this step itself failed: `@step.compensate`.

        Args:
            fn: The handler, an `async def`; its parameters wire like the step's, plus
                the failure as the first argument.

        Returns:
            `fn` itself (the decorator records, it does not wrap).

        Raises:
            DefinitionError: The handler's parameters cannot be wired, or one is declared twice.
        """
        attach_handler(self.reactor.table, self.name, HandlerKind.COMPENSATE, fn)
        return fn

    def __repr__(self) -> str:
        return f"<Step {self.reactor.name}.{self.name}>"


class MapStep(Step[P, R]):
    """What `@flow.map_step` returns: an `rf.Step` whose plain call runs the function on one
    element. `@ship.undo` undoes one completed element (its result first, then any of the map's
    parameters, the element's included); `@ship.compensate` runs once for each failed element;
    `@ship.undo_all` declares a bulk undo instead of per-element `undo` (declaring both is a
    `DefinitionError`). See [Maps](maps.md#rolling-a-map-back)."""

    __slots__ = ()

    def undo_all(self, fn: F) -> F:
        """Declare a bulk undo of the map: called once per rollback with a lazy async iterator
        of the completed elements' results in element order (replaces per-element `undo`).

        Args:
            fn: The handler, an `async def`; its parameters wire like the step's, plus
                that iterator as the first argument.

        Returns:
            `fn` itself (the decorator records, it does not wrap).

        Raises:
            DefinitionError: The handler's parameters cannot be wired, or one is declared twice.
        """
        attach_handler(self.reactor.table, self.name, HandlerKind.UNDO_ALL, fn)
        return fn

    def __repr__(self) -> str:
        return f"<MapStep {self.reactor.name}.{self.name}>"


After = Sequence[str | Step[Any, Any]]
"""What `after=` takes: step names or handles."""


def after_names(after: After | str | Step[Any, Any]) -> tuple[str, ...]:
    """The step names an `after=` value gives (a handle stands for its step's name).

    Args:
        after: A step name, a handle, or a sequence of them.
    """
    items = [after] if isinstance(after, str | Step) else list(after)
    return tuple(item.name if isinstance(item, Step) else item for item in items)
