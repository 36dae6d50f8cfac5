"""Element reactors (`map_step(reactor=child)`): each element runs the child reactor as a
flattened child of the run, like `compose` — the child's steps execute inside the run (inline
in the run's process, or in the element's worker job for a fanned-out map), never as a run of
their own: no run record, no run id, no liveness lock and no listing entry per element.

Running one element (`run_child`), in order:

1. The map's function returns the element's child inputs, validated against the child's
   `inputs` (a failure fails the element).
2. The child reactor's own gates are taken for the element (scope `<map>:<index>`), then its
   steps run on the forward drive in memory (`element_run`): concurrently where they can, with
   their own retries, timeouts, step gates and composed children. The element holds its locks
   as `<run>:<map>:<index>` (elements exclude each other), except a lock this execution holds
   as the run, which it re-enters as a composed child does (see `gates.scope`). Nothing is
   written while they run: the element's child steps are checkpointed together, at its settle.
3. Completed: the element's result is the child's value, checked against the element
   annotation; the element's slot also keeps the child's inputs, step records and its nested
   maps' element slots (when undoing it can run something: `undoable`), for its rollback. A
   map inside the child runs inline in the element, its slots held in memory (`memory_slots`).
4. Failed (a step failed after its retries, or halted): the element's completed child steps are
   rolled back here, newest first (compensate the failed ones, undo the completed ones, as a
   composed child's), and the element fails with the child step's error. Failures of that
   rollback are the element's `rollback_error`.

A crash mid-element stores nothing of it: the element is run again from its child's first
step. The step contexts' idempotency keys (`<run>:<map>:<index>.<child step>`) are the same on
every retry and re-run of that element, so the systems a child step calls see the same key.

Undoing a completed element (`undo_child`, when its map rolls back): its child's recorded
steps are rolled back newest first (a nested map's turn: its completed inner elements, highest
index first), each handler's outcome saved in the element's slot as it returns, so a rollback
cut off (a crash, a killed undo job) resumes after the last saved undo.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reactorflow import clock, records
from reactorflow.definition.graph import plan_for
from reactorflow.definition.params import MapRead
from reactorflow.definition.specs import StepKind
from reactorflow.errors import GateBusy, LockLost, RecordedError
from reactorflow.protection import fields, sealing
from reactorflow.protection.fields import ERROR
from reactorflow.protection.keys import RunKeys
from reactorflow.records import (
    NIL,
    ElementRecord,
    ErrorRecord,
    RollbackFailure,
    StepRecord,
    summary,
)
from reactorflow.runtime.engine import kinds
from reactorflow.runtime.engine.execution import hooks_for
from reactorflow.runtime.engine.forward import Forward
from reactorflow.runtime.engine.inputs import validate_inputs
from reactorflow.runtime.engine.lockkeeper import ensure_live
from reactorflow.runtime.engine.map_reads import element_count, load_list
from reactorflow.runtime.engine.rollback import (
    Rollback,
    call_handler,
    collected_failures,
    roll_back,
)
from reactorflow.runtime.engine.runners import Ending, Verdict
from reactorflow.runtime.engine.stepcall import StepEnd, arguments, call_step
from reactorflow.runtime.gates.run_gates import run_needs
from reactorflow.runtime.gates.scope import Entry, enter, leave
from reactorflow.runtime.gates.step_gates import call_gated, enter_whole, leave_whole
from reactorflow.runtime.maps.element_run import ElementExecution
from reactorflow.runtime.maps.elements import Scope, call_element, encode, fence
from reactorflow.status import HandlerKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node, Plan


def element_keys(scope: Scope, node: Node, index: int | None) -> RunKeys:
    """The keys of an element reactor's execution: the run's, its values named under the
    element (`maps.<map>.<i>.`; an async reactor's child inside an element: under its step)."""
    return scope.keys.within(fields.element(node.key, index) if index is not None
                             else f"steps.{node.key}.child.")


def _execution(scope: Scope, node: Node, index: int | None, inputs: Any, steps: dict[str, Any],
               maps: dict[str, dict[int, bytes]] | None = None) -> ElementExecution:
    hooks = scope.hooks if scope.hooks is not None else hooks_for(scope.plan.reactor)
    ex = ElementExecution(scope.run_id, node, index, inputs, steps, hooks=hooks,
                          gates=scope.gates, prefix=scope.step_prefix, maps=maps,
                          keys=element_keys(scope, node, index))
    ex.lease = scope.lease  # its steps start only while its map's lock is held
    return ex


async def run_child(scope: Scope, node: Node, kwargs: dict[str, Any], index: int | None
                    ) -> tuple[ElementRecord, BaseException | None]:
    """Run one element's child reactor to its end (see the module docstring, steps 1-4); the
    element's outcome, with the live exception when it failed. `index` None: the child of an
    async reactor inside an element (`element_run.ElementForward`), run the same way, its
    outcome's result the child's value as it is."""
    child = node.spec.child
    assert child is not None
    try:
        inputs = validate_inputs(child, await node.spec.fn(**kwargs))
        raw = element_keys(scope, node, index).seal_raw(fields.INPUTS, records.encode(inputs))
    except Exception as exc:
        return ElementRecord(StepStatus.FAILED, 1, error=ErrorRecord.from_exception(exc)), exc
    ex = _execution(scope, node, index, raw, {})
    entry: Entry | None = None
    error: BaseException | None = None
    live: dict[str, BaseException] = {}
    try:
        if child.gates:
            entry = await enter(ex.gates, run_needs(child, inputs, scope.run_id), ex.element,
                                wait=True, step=node.key, element=ex.element)
            if not entry.admitted:
                error = entry.busy or GateBusy("period", entry.period_done.key
                                               if entry.period_done else "", run_id=ex.run_id,
                                               step=node.key)
        if error is None:
            verdict = await ElementForward(ex, kinds=kinds.forward_table(),
                                           max_concurrency=child.max_concurrency).run()
            if verdict.status is Ending.COMPLETED:
                value = await _value(ex)
                result = (scope.keys.seal_raw(fields.result(node.key), records.encode(value))
                          if index is None else encode(scope, node, index, value))
                kept = dict(ex.records) if undoable(ex.plan) else {}
                return ElementRecord(StepStatus.COMPLETED, 1, result, inputs=raw if kept else NIL,
                                     steps=kept, maps=ex.held.maps if kept else {}), None
            live = verdict.errors
            error = _why(ex, verdict)
    except LockLost:
        raise  # the lock was lost: the element stops, nothing of it is stored
    except Exception as exc:  # the child's value does not match the element annotation
        error = exc
    finally:
        if entry is not None:
            await leave(ex.gates, entry, completed=error is None)
    done = await roll_back(ex, live)
    stored = (ErrorRecord(error.type, error.message) if isinstance(error, RecordedError)
              else ErrorRecord.from_exception(error))
    return ElementRecord(StepStatus.FAILED, 1, error=stored,
                         rollback_error=_summed(_failures(ex, done))), error


async def _value(ex: ElementExecution) -> Any:
    """The child's value: its value step's result (None when it has none, or it skipped); a
    nested map's, the list its reader would get."""
    key = ex.plan.levels[""].value_key
    if key is None or ex.status_of(key) != StepStatus.COMPLETED:
        return None
    options = ex.plan.nodes[key].spec.map
    if options is not None:
        read = MapRead.VALUES if options.atomic else MapRead.OUTCOMES
        return await load_list(ex.slots, ex.keys, ex.plan.nodes[key], element_count(ex, key),
                               read)
    return ex.value_of(key)


def undoable(plan: Plan) -> bool:
    """Whether undoing an element of this child can run anything (else its records are not
    kept): an undo handler, a nested map's `undo_all`, or a nested element reactor's."""
    for n in plan.nodes.values():
        if n.spec.undo is not None:
            return True
        if n.spec.map is not None and (n.spec.map.undo_all is not None or (
                n.spec.child is not None and undoable(plan_for(n.spec.child)))):
            return True
    return False


def _why(ex: ElementExecution, verdict: Verdict) -> BaseException:
    """The exception an element whose child did not complete fails with: its first failed
    step's (as it was raised), else what stopped it."""
    for key in verdict.failed:
        error = verdict.errors.get(key)
        if error is not None:
            return error
        stored = ex.records[key].error
        if stored is not None:
            return RecordedError(stored.type, ex.keys.shown_text(ERROR, stored.message),
                                 step=key)
    if verdict.status is Ending.HALTED:
        return RecordedError("Halt", f"element reactor {ex.reactor!r} halted: "
                             f"{verdict.halt_reason or ''}", step=None)
    return RecordedError("ElementReactorStopped",
                         f"element reactor {ex.reactor!r} ended {verdict.status}", step=None)


def _failures(ex: ElementExecution, done: Rollback) -> list[RollbackFailure]:
    """The child's rollback failures: those its step records hold, and those of its nested
    maps' elements (held in the maps' slots, not on a step record)."""
    inner = [f for f in done.failures
             if ex.plan.nodes[f.step].spec.map is not None and f.kind is not HandlerKind.UNDO_ALL]
    return collected_failures(ex) + inner


def _summed(failures: list[RollbackFailure]) -> ErrorRecord | None:
    """The element's `rollback_error`: its child's rollback failures, in one record."""
    if not failures:
        return None
    first = failures[0]
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    return ErrorRecord(first.type, f"element reactor step {first.step!r}: {first.kind} "
                       f"failed: {first.message}{more}")


async def undo_child(scope: Scope, node: Node, index: int,
                     record: ElementRecord) -> ErrorRecord | None:
    """Roll back a completed element's child steps, newest first; each handler's outcome is
    saved in the element's slot as it returns. Its failures, summed (None when all returned).
    `record` keeps the child's step records until the caller stores the element undone."""
    if not record.steps:
        return None  # nothing of its child can be undone (or it was, before a crash)
    ex = _execution(scope, node, index, record.inputs, dict(record.steps), record.maps)

    async def save() -> None:
        record.steps, record.maps = dict(ex.records), ex.held.maps
        await scope.slots.save_elements(
            scope.run_id, node.key, {index: records.encode(sealing.element(scope.keys, record))},
            replace=True, owner=fence(scope))

    ex.writer.save = save
    ex.held.after = save  # each nested map's element undo, saved as it returns
    failures = _failures(ex, await roll_back(ex))
    record.steps, record.inputs, record.maps = {}, NIL, {}
    return _summed(failures)


async def call_any_element(scope: Scope, node: Node, base: dict[str, Any], index: int,
                           item: Any) -> tuple[ElementRecord, BaseException | None]:
    """Run one element to its outcome: an element reactor's child (`run_child`), else the
    map's function (`elements.call_element`); with the live exception when it failed."""
    if node.spec.child is None:
        return await call_element(scope, node, base, index, item)
    options = node.spec.map
    assert options is not None
    kwargs = dict(base)
    kwargs[options.element] = item
    await ensure_live(scope.lease)  # (its child's steps check it too, as any step does)
    return await run_child(scope, node, kwargs, index)


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
        await ex.writer.checkpoint(node.key, record, [])
        self._after_checkpoint(node)

    async def _reactor(self, node: Node) -> None:
        """An async reactor inside an element runs its child here, once, as the element runs
        its own (`children.run_child`: in memory, no run of its own, its steps named
        `<element>.<step>.<child step>`, a failing child rolling its own steps back); the
        step's result is the child's value, and like any async unit it is never rolled back.
        Step gates on it are held while its child runs."""
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
            ex.values[node.key] = node.decoder.decode(
                ex.keys.open(fields.result(node.key), outcome.result))
            done = StepRecord(StepStatus.COMPLETED, 1, started, clock.now(), outcome.result)
            await self._finish(node, done, [])  # seq 0: never undone
            return
        await self._fail_step(node, error, detail=summary(error), started_at=started,
                              error_record=outcome.error)
        ex.records[node.key].rollback_error = outcome.rollback_error  # its child's rollback
