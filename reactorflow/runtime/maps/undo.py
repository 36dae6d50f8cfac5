"""Rolling a map back (one action of the saga's rollback, see `runtime.engine.rollback`).

0. A fanned-out map still `running` (the run stopped while its elements were out) first
   waits until none of its elements is in flight (`inflight`: the save that began the
   rollback closed the map, so no element starts any more; those that started settle, or are
   run again once cut off), parking the run meanwhile as for its undo throws.
1. Failed elements already ran their compensate (when they failed); a compensate that raised
   is reported here, once per rollback, as a `compensate` failure of the map.
2. With `undo_all`: called once with a lazy iterator of the completed elements' results in
   index order (not called when none completed); its failure is one `undo_all` failure.
3. Else, with `undo` (or an element reactor: each element's child steps are undone, newest
   first, by `children.undo_child`): inline, each completed
   element is undone here, highest index first; fanned out, worker jobs undo them in throws
   of `batch_size`, started highest index first, while the run parks (`undo_throws`). Each undo's
   outcome is stored in that element's slot, so a rollback cut off by a crash resumes after the
   last saved undo. A failing undo is recorded and the rollback goes on.
4. The map's record becomes `undone` (for every status it had: running, failed, completed).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import records
from reactorflow.definition.graph import Node
from reactorflow.errors import ArgumentError, LockLost
from reactorflow.protection import fields, sealing
from reactorflow.protection.fields import ERROR
from reactorflow.protection.keys import RunKeys
from reactorflow.records import ElementRecord, ErrorRecord, RollbackFailure, describe, summary
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.lockkeeper import ensure_live
from reactorflow.runtime.engine.map_reads import element_key, walk
from reactorflow.runtime.engine.stepcall import arguments, context_for
from reactorflow.runtime.maps.children import undo_child
from reactorflow.runtime.maps.elements import Scope, context, fence, source_of
from reactorflow.runtime.maps.inflight import wait_in_flight
from reactorflow.runtime.maps.undo_throws import roll_back_fanned
from reactorflow.status import EventKind, HandlerKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.runtime.engine.execution import Execution

log = logging.getLogger("reactorflow.rollback")


async def _count(ex: Execution, node: Node) -> int:
    record = ex.records[node.key]
    if record.status == StepStatus.COMPLETED:
        return int(msgspec.msgpack.decode(record.result))
    try:
        return len(await source_of(ex, node))
    except ArgumentError:
        return 0  # it never mapped anything


@dataclass(slots=True)
class MapRollback:
    """How a map's rollback went: done (its failures), or parked while its undo jobs are out."""

    failures: list[RollbackFailure] = field(default_factory=list)
    parked_since: float | None = None  # a fanned-out map's throw is out: the run parks


async def roll_back_map(ex: Execution, key: str) -> MapRollback:
    """Roll map `key` back (see the module docstring)."""
    node = ex.plan.nodes[key]
    options = node.spec.map
    assert options is not None
    fanned = options.fan_out and not ex.mode.maps_inline
    if fanned and ex.records[key].status == StepStatus.RUNNING:  # elements may still be out
        since = await wait_in_flight(ex, node)
        if since is not None:
            return MapRollback(parked_since=since)
    count = await _count(ex, node)
    if fanned and _undone_each(node):
        since = await roll_back_fanned(ex, node, count)
        if since is not None:
            return MapRollback(parked_since=since)
        failures = await _recorded_failures(ex, key, count)
    else:
        failures = await _roll_back_here(ex, node, count)
    closed = msgspec.structs.replace(ex.records[key], status=StepStatus.UNDONE,
                                     compensate_pending=False)
    await ex.writer.checkpoint(key, closed, [event(EventKind.UNDO_COMPLETED, key)])
    return MapRollback(failures)


async def _roll_back_here(ex: Execution, node: Node, count: int) -> list[RollbackFailure]:
    """Steps 1-3 in this process: compensate failures, then `undo_all` or per-element undo."""
    key = node.key
    options = node.spec.map
    assert options is not None
    failures: list[RollbackFailure] = []
    completed = 0
    async for index, record in walk(ex.slots, ex.run_id, key, count):
        if record.status is StepStatus.FAILED and record.rollback_error is not None:
            failures.append(_failure(ex.keys, key, index, HandlerKind.COMPENSATE,
                                     record.rollback_error))
        elif record.status is StepStatus.COMPLETED and record.rollback_error is None:
            completed += 1
    base = await _base_arguments(ex, node)
    if not completed:
        return failures
    if _undone_each(node):
        failures += await _undo_each(ex, node, base, count)
    elif options.undo_all is not None and ex.records[key].rollback_error is None:
        failure = await _undo_all(ex, node, base, count)
        if failure is not None:
            failures.append(failure)
    return failures


def _undone_each(node: Node) -> bool:
    """Its completed elements are undone one by one: an element reactor's child steps, or the
    map's `undo` (without `undo_all`)."""
    options = node.spec.map
    assert options is not None
    return node.spec.child is not None or (options.undo_all is None
                                           and node.spec.undo is not None)


async def _recorded_failures(ex: Execution, key: str, count: int) -> list[RollbackFailure]:
    """The failures the map's element slots hold once undo jobs undid it: compensates in index
    order, then undos highest index first."""
    compensates: list[RollbackFailure] = []
    undos: list[RollbackFailure] = []
    async for index, record in walk(ex.slots, ex.run_id, key, count, backwards=True):
        if record.rollback_error is None:
            continue
        if record.status is StepStatus.FAILED:
            compensates.insert(0, _failure(ex.keys, key, index, HandlerKind.COMPENSATE,
                                           record.rollback_error))
        elif record.status is StepStatus.COMPLETED:
            undos.append(_failure(ex.keys, key, index, HandlerKind.UNDO,
                                  record.rollback_error))
    return compensates + undos


async def undo_element(scope: Scope, node: Node, base: dict[str, Any], item: Any, index: int,
                       record: ElementRecord) -> None:
    """Undo one completed element (its undo handler, or its element reactor's child steps,
    each saved in its slot as it returns) and set its outcome on `record`: `undone`, or its
    undo's error (logged; never raised)."""
    options = node.spec.map
    assert options is not None
    try:
        if node.spec.child is not None:

            failed = await undo_child(scope, node, index, record)
            if failed is not None:
                log.warning("reactorflow.undo.failed run_id=%s step=%s index=%d error=%s: %s",
                            scope.run_id, node.key, index, failed.type, failed.message)
                record.rollback_error = failed
                return
        else:
            handler = node.spec.undo
            assert handler is not None
            arguments = dict(base)
            arguments[options.element] = item
            kwargs = {name: arguments[name] for name in handler.names if name in arguments}
            if handler.context_name is not None:
                kwargs[handler.context_name] = context(scope, node, index, record.attempts or 1)
            result = handler.fn(node.decoder.decode(scope.keys.open(
                fields.element_result(node.key, index), record.result)), **kwargs)
            if inspect.isawaitable(result):
                await result
    except LockLost:
        raise  # the lock was lost: nothing was undone, and nothing may be recorded
    except Exception as exc:
        log.warning("reactorflow.undo.failed run_id=%s step=%s index=%d error=%s",
                    scope.run_id, node.key, index, summary(exc))
        record.rollback_error = ErrorRecord.from_exception(exc)
    else:
        record.status = StepStatus.UNDONE


async def _base_arguments(ex: Execution, node: Node) -> dict[str, Any]:
    try:
        return await arguments(ex, node)
    except ArgumentError:
        return {}


async def _undo_each(ex: Execution, node: Node, base: dict[str, Any],
                     count: int) -> list[RollbackFailure]:
    """Undo the completed elements one at a time, highest index first; each outcome is saved
    in the element's slot as it returns; a failure is recorded and the rest goes on."""
    items = await source_of(ex, node) if node.spec.child is None else ()
    failures: list[RollbackFailure] = []
    async for index, record in walk(ex.slots, ex.run_id, node.key, count, backwards=True):
        if record.status is not StepStatus.COMPLETED or record.rollback_error is not None:
            continue
        await ensure_live(ex.lease)  # a lost lock starts no further undo
        await undo_element(ex, node, base, items[index] if items else None, index, record)
        if record.rollback_error is not None:
            failures.append(_failure(ex.keys, node.key, index, HandlerKind.UNDO,
                                     record.rollback_error))
        await ex.slots.save_elements(ex.run_id, node.key,
                                     {index: records.encode(sealing.element(ex.keys, record))},
                                     replace=True, owner=fence(ex))
    return failures


async def _undo_all(ex: Execution, node: Node, base: dict[str, Any],
                    count: int) -> RollbackFailure | None:
    options = node.spec.map
    assert options is not None and options.undo_all is not None
    handler = options.undo_all

    async def results() -> AsyncIterator[Any]:
        async for index, record in walk(ex.slots, ex.run_id, node.key, count):
            if record.status is StepStatus.COMPLETED and record.rollback_error is None:
                yield node.decoder.decode(ex.keys.open(fields.element_result(node.key, index),
                                                       record.result))

    kwargs = {name: base[name] for name in handler.names if name in base}
    if handler.context_name is not None:
        kwargs[handler.context_name] = context_for(ex, node, 1)
    try:
        outcome = handler.fn(results(), **kwargs)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception as exc:
        log.warning("reactorflow.undo_all.failed run_id=%s step=%s error=%s", ex.run_id,
                    node.key, summary(exc))
        error = ErrorRecord.from_exception(exc)
        failed = msgspec.structs.replace(ex.records[node.key], rollback_error=error)
        await ex.writer.checkpoint(node.key, failed, [event(EventKind.UNDO_ALL_FAILED, node.key,
                                                            detail=summary(exc))])
        return RollbackFailure(node.key, HandlerKind.UNDO_ALL, describe(exc), type(exc).__name__)
    return None


def _failure(keys: RunKeys, key: str, index: int, kind: HandlerKind,
             error: ErrorRecord) -> RollbackFailure:
    """A rollback failure of element `index` (its stored error text opened, to be sealed
    again as part of the run's error)."""
    return RollbackFailure(key, kind, f"element {index} ({element_key(key, index)}): "
                           f"{keys.shown_text(ERROR, error.message)}", error.type)
