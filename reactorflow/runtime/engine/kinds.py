"""The step-kind table: what the engine does with each `StepKind`.

Every kind of step has one `KindHandler`: how the forward drive runs it (`forward`), and, where
the kind needs its own, how a rollback undoes it (`roll_back`) and how a run parked at it is
looked at again (`settled_while_parked` going forward, `undone_while_parked` rolling back).
The engine's own kinds (step, interrupt, compose, async step, async reactor) are in the table
from the start; the map step registers itself from `runtime.maps` (imported by the runtime's
package, above the engine), and so will `sleep`. Adding a kind is one module with its handler
and one `register` call: the driver, the forward drive, rollback and parking look it up here.

The forward drive receives the table when it is built (`Forward(ex, kinds=...)`), so this module
knows the drive's type and the drive knows nothing of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from reactorflow.definition.specs import StepKind
from reactorflow.errors import ReactorflowError

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.records import RollbackFailure
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.runtime.engine.forward import Forward


class KindRollback(Protocol):
    """How a kind's own rollback of one step went: done (its `failures`), or parked while work
    it sent out is still out (`parked_since`: the run parks there, the rollback goes on later)."""

    @property
    def failures(self) -> list[RollbackFailure]: ...

    @property
    def parked_since(self) -> float | None: ...


ForwardHandler = Callable[["Forward", "Node"], Awaitable[None]]
RollbackHandler = Callable[["Execution", str], Awaitable[KindRollback]]
ParkedCheck = Callable[["Execution", str], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class KindHandler:
    """What the engine does with one kind of step (see the module docstring).

    Attributes:
        forward: Runs a step of this kind in the forward drive, once its dependencies settled
            (and it was not skipped): it records the step's outcome through the drive
            (`Forward._finish`, `_fail_step`, `_skip` ...) or leaves it waiting or parked.
        roll_back: The kind's own rollback of a step that started (None: the plain one, the
            step's undo or compensate handler).
        settled_while_parked: Whether what a run parked at this step waits for has settled
            (the run is then enqueued at once).
        undone_while_parked: The same for a rollback parked at this step.
    """

    forward: ForwardHandler
    roll_back: RollbackHandler | None = None
    settled_while_parked: ParkedCheck | None = None
    undone_while_parked: ParkedCheck | None = None


async def _step(drive: Forward, node: Node) -> None:
    await drive._step(node)


async def _interrupt(drive: Forward, node: Node) -> None:
    if node.key in drive.ex.claims:  # its payload came: the body runs with it
        await drive._step(node)
    else:
        await drive._wait_for_payload(node)


async def _compose(drive: Forward, node: Node) -> None:
    await drive._compose(node)


async def _unit(drive: Forward, node: Node) -> None:
    await drive._dispatch_unit(node)


_TABLE: dict[StepKind, KindHandler] = {
    StepKind.STEP: KindHandler(_step),
    StepKind.INTERRUPT: KindHandler(_interrupt),
    StepKind.COMPOSE: KindHandler(_compose),
    StepKind.ASYNC_STEP: KindHandler(_unit),
    StepKind.ASYNC_REACTOR: KindHandler(_unit),
}
_FORWARD: dict[StepKind, ForwardHandler] = {}


def register(kind: StepKind, handler: KindHandler) -> None:
    """Register the handler of a step kind (once per kind; the same handler again is a no-op).

    Args:
        kind: The step kind.
        handler: What the engine does with steps of that kind.

    Raises:
        ReactorflowError: another handler is registered for `kind` already.
    """
    known = _TABLE.get(kind)
    if known is not None and known is not handler:
        raise ReactorflowError(f"step kind {kind!r} has a handler already ({known.forward!r}); "
                               "register each kind once")
    _TABLE[kind] = handler
    _FORWARD.clear()


def unregister(kind: StepKind) -> None:
    """Remove the handler of a step kind (a test's toy kind, when the test ends)."""
    _TABLE.pop(kind, None)
    _FORWARD.clear()


def forward_table() -> Mapping[StepKind, ForwardHandler]:
    """Each registered kind's `forward` handler: what the forward drive is built with (kept
    between drives; registration renews it)."""
    if not _FORWARD:
        _FORWARD.update({kind: handler.forward for kind, handler in _TABLE.items()})
    return _FORWARD


def table() -> Mapping[StepKind, KindHandler]:
    """The handlers of every registered kind (a live view: registration updates it)."""
    return _TABLE


def handler_of(kind: StepKind) -> KindHandler:
    """The handler of `kind`.

    Raises:
        ReactorflowError: no handler is registered for it (the module that handles that kind
            was not imported: import `reactorflow`, which imports every kind's module).
    """
    try:
        return _TABLE[kind]
    except KeyError:
        raise ReactorflowError(
            f"no handler is registered for step kind {kind!r}: import reactorflow (which "
            "registers every kind) before running a reactor") from None
