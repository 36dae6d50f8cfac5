"""The execution of one element of an element reactor (`map_step(reactor=child)`): the child's
compiled plan, driven in this process for that element's inputs, like a composed child, but
with nothing stored as a run.

* `ElementExecution` is an `Execution` of the child's plan whose checkpoints stay in memory
  (or, while it rolls back, go to the element's slot through its `save` callback): no run
  record, no run id, no liveness lock, no listing entry. It has the run's id, so its steps'
  contexts and gates belong to the run; its step names (contexts, idempotency keys, gate
  scopes) carry the element: `<map>:<index>.<child step key>` (an element of a map nested in
  an element: `<outer map>:<index>.<map>:<index>.<step>`). A map inside the element runs
  inline there (`fan_out=True` too), its element slots held in memory (`held.HeldSlots`).
* `ElementForward` is the forward drive of any run, except that an async step inside the
  element runs right there, in the element's task group, instead of in a worker (the element
  has no run record a worker could report to), and an async reactor's child runs there too,
  in memory like the element's own (no run of its own); like any async unit, neither is ever
  rolled back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from reactorflow import clock, config, records
from reactorflow.definition.graph import plan_for
from reactorflow.definition.specs import StepKind
from reactorflow.records import (
    ElementRecord,
    ErrorRecord,
    Event,
    RunMeta,
    RunState,
    StepRecord,
    summary,
)
from reactorflow.runtime.engine.execution import Execution
from reactorflow.runtime.engine.forward import Forward
from reactorflow.runtime.engine.map_reads import element_key
from reactorflow.runtime.engine.rollback import call_handler
from reactorflow.runtime.engine.stepcall import StepEnd, arguments, call_step
from reactorflow.runtime.gates.step_gates import call_gated, enter_whole, leave_whole
from reactorflow.runtime.maps.memory_slots import HeldSlots
from reactorflow.status import Status, StepStatus

if TYPE_CHECKING:
    import msgspec

    from reactorflow.definition.graph import Node
    from reactorflow.middleware import Hooks
    from reactorflow.runtime.gates.scope import GateHolds

Save = Callable[["ElementExecution"], Awaitable[None]]


class ElementExecution(Execution):
    """One element's child reactor, as an execution that stores nothing of its own."""

    def __init__(self, run_id: str, node: Node, index: int | None, inputs: msgspec.Raw,
                 steps: dict[str, StepRecord], *, hooks: Hooks, gates: GateHolds | None,
                 prefix: str = "", maps: Mapping[str, Mapping[int, bytes]] | None = None,
                 save: Save | None = None) -> None:
        child = node.spec.child
        assert child is not None
        now = clock.now()
        meta = RunMeta(records.SCHEMA_VERSION, run_id, child.name, now, inputs, {})
        state = RunState(Status.RUNNING, now, handed_off=True)  # no background hand-off
        super().__init__(plan=plan_for(child), storage=config.current_storage(), owner="",
                         meta=meta, state=state, steps=steps, claims={}, hooks=hooks)
        if gates is not None:  # the run's (inline) or the element job's: renewed by its holder
            self.gates = gates
        else:  # a job's own (an undo job's): never the run's execution, which may be parked
            self.gates.borrows = True
        # prefix: the enclosing element's; no index: an async reactor's child, named by its step
        self.element = prefix + (node.key if index is None else element_key(node.key, index))
        self.step_prefix = f"{self.element}."
        self.held = HeldSlots(maps)
        self.slots = self.held
        self.maps_inline = True
        self.save = save
        self.folds = False  # its checkpoints stay here: no final save to fold the last into

    async def checkpoint(self, key: str, record: StepRecord, events: list[Event], *,
                         unit: bool = False) -> None:
        """Keep the step record here; while rolling back, `save` stores the element's slot."""
        self.records[key] = record
        if self.save is not None:
            await self.save(self)


class ElementForward(Forward):
    """The forward drive of an element's child (see the module docstring)."""

    async def _dispatch_unit(self, node: Node) -> None:
        """An async step inside an element runs here, once (its own retries), and compensates
        itself if its last attempt failed; its readers go on once it settled."""
        ex = self.ex
        if node.kind is StepKind.ASYNC_REACTOR:
            await self._reactor(node)
            return
        out = await (call_gated(ex, node) if node.spec.gates else call_step(ex, node))
        if out.status is StepEnd.COMPLETED:
            ex.values[node.key] = out.value
            record = StepRecord(StepStatus.COMPLETED, out.attempts, out.started_at,
                                out.finished_at, out.raw)  # seq 0: never undone
        elif out.status is StepEnd.SKIPPED:
            record = StepRecord(StepStatus.SKIPPED, finished_at=clock.now())
        else:
            error = out.error or RuntimeError(f"async step {node.key!r} ended {out.status}")
            record = StepRecord(StepStatus.FAILED, out.attempts, out.started_at,
                                out.finished_at or clock.now(),
                                error=ErrorRecord.from_exception(error))
            handler = node.spec.compensate
            if handler is not None and out.body_started:
                try:
                    await call_handler(ex, handler, node.key, error)
                except Exception as exc:
                    record.rollback_error = ErrorRecord.from_exception(exc)
                else:
                    record.status = StepStatus.COMPENSATED
        await ex.checkpoint(node.key, record, [])
        self._after_checkpoint(node)

    async def _reactor(self, node: Node) -> None:
        """An async reactor inside an element runs its child here, once, as the element runs
        its own (`children.run_child`: in memory, no run of its own, its steps named
        `<element>.<step>.<child step>`, a failing child rolling its own steps back); the
        step's result is the child's value, and like any async unit it is never rolled back.
        Step gates on it are held while its child runs."""
        from reactorflow.runtime.maps.children import run_child  # noqa: PLC0415 (a cycle)

        ex = self.ex
        started = clock.now()
        try:
            kwargs = await arguments(ex, node)
            if await self._skipped_by_when(node, kwargs):
                return
            entry = await enter_whole(ex, node, kwargs) if node.spec.gates else None
        except Exception as exc:
            await self._fail_step(node, exc, detail=summary(exc), started_at=started)
            return
        if entry is not None and not entry.admitted:
            await self._refused(node, entry)
            return
        outcome: ElementRecord | None = None
        try:
            outcome, error = await run_child(ex, node, kwargs, None)
        finally:
            await leave_whole(ex, entry, completed=outcome is not None and outcome.error is None)
        if error is None:
            ex.values[node.key] = node.decoder.decode(outcome.result)
            done = StepRecord(StepStatus.COMPLETED, 1, started, clock.now(), outcome.result)
            await self._finish(node, done, [])  # seq 0: never undone
            return
        await self._fail_step(node, error, detail=summary(error), started_at=started,
                              error_record=outcome.error)
        ex.records[node.key].rollback_error = outcome.rollback_error  # its child's rollback
