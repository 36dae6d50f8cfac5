"""The execution of one element of an element reactor (`map_step(reactor=child)`): the child's
compiled plan, driven in this process for that element's inputs, like a composed child, but
with nothing stored as a run.

* `ElementExecution` is an `Execution` of the child's plan whose checkpoints stay in memory
  (or, while it rolls back, go to the element's slot through its `save` callback): no run
  record, no run id, no liveness lock, no listing entry. It has the run's id, so its steps'
  contexts and gates belong to the run; its step names (contexts, idempotency keys, gate
  scopes) carry the element: `<map>:<index>.<child step key>` (an element of a map nested in
  an element: `<outer map>:<index>.<map>:<index>.<step>`). A map inside the element runs
  inline there (`fan_out=True` too), its element slots held in memory (`memory_slots.HeldSlots`).
* Its forward drive is `children.ElementForward`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from reactorflow import clock, config, records
from reactorflow.definition.graph import plan_for
from reactorflow.protection.keys import RunKeys
from reactorflow.records import (
    Event,
    RunMeta,
    RunState,
    StepRecord,
)
from reactorflow.runtime.engine.execution import Execution
from reactorflow.runtime.engine.map_reads import element_key
from reactorflow.runtime.engine.mode import ELEMENT
from reactorflow.runtime.engine.writer import RunWriter
from reactorflow.runtime.maps.memory_slots import HeldSlots
from reactorflow.status import Status

if TYPE_CHECKING:
    import msgspec

    from reactorflow.definition.graph import Node
    from reactorflow.middleware import Hooks
    from reactorflow.runtime.gates.scope import GateHolds

Save = Callable[[], Awaitable[None]]


class ElementWriter(RunWriter):
    """An element's writes: its checkpoints stay in memory (its records); while it rolls back,
    `save` stores the element's slot after each one. It saves no state of its own."""

    __slots__ = ("save",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.save: Save | None = None
        self.folds = False  # its checkpoints stay here: no final save to fold the last into

    async def checkpoint(self, key: str, record: StepRecord, events: list[Event], *,
                         unit: bool = False) -> None:
        """Keep the step record here; while rolling back, `save` stores the element's slot."""
        self.records[key] = record
        if self.save is not None:
            await self.save()


class ElementExecution(Execution):
    """One element's child reactor, as an execution that stores nothing of its own."""

    __slots__ = ("held",)
    writer_kind = ElementWriter
    writer: ElementWriter

    def __init__(self, run_id: str, node: Node, index: int | None, inputs: msgspec.Raw,
                 steps: dict[str, StepRecord], *, hooks: Hooks, gates: GateHolds | None,
                 prefix: str = "", maps: Mapping[str, Mapping[int, bytes]] | None = None,
                 keys: RunKeys | None = None) -> None:
        child = node.spec.child
        assert child is not None
        now = clock.now()
        meta = RunMeta(records.SCHEMA_VERSION, run_id, child.name, now, inputs, {})
        state = RunState(Status.RUNNING, now, handed_off=True)  # no background hand-off
        super().__init__(plan=plan_for(child), storage=config.current_storage(), owner="",
                         meta=meta, state=state, steps=steps, claims={}, hooks=hooks,
                         gates=gates, mode=ELEMENT, keys=keys)
        # gates: the run's (inline) or the element job's, renewed by its holder; else a job's
        # own (an undo job's): never the run's execution, which may be parked
        if gates is None:
            self.gates.borrows = True
        # prefix: the enclosing element's; no index: an async reactor's child, named by its step
        self.element = prefix + (node.key if index is None else element_key(node.key, index))
        self.step_prefix = f"{self.element}."
        self.held = HeldSlots(maps)
        self.slots = self.held
