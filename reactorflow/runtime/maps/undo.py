"""Rolling a map back (one action of the saga's rollback, see `runtime.rollback`).

1. Failed elements already ran their compensate (when they failed); a compensate that raised
   is reported here, once per rollback, as a `compensate` failure of the map.
2. With `undo_all`: called once with a lazy iterator of the completed elements' results in
   index order (not called when none completed); its failure is one `undo_all` failure.
3. Else, with `undo`: each completed element is undone, highest index first; each undo's outcome
   is stored in that element's slot before the next starts, so a rollback cut off by a crash
   resumes after the last saved undo. A failing undo is recorded and the rollback goes on.
4. The map's record becomes `undone` (for every status it had: running, failed, completed).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from reactorflow import records
from reactorflow.definition.graph import Node
from reactorflow.errors import ArgumentError
from reactorflow.records import ElementRecord, ErrorRecord, RollbackFailure, describe, summary
from reactorflow.runtime.execution import event
from reactorflow.runtime.maps.children import undo_child
from reactorflow.runtime.maps.elements import context, source_of
from reactorflow.runtime.maps.reading import element_key, walk
from reactorflow.runtime.stepcall import context_for, resolve_arguments
from reactorflow.status import HandlerKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.runtime.execution import Execution

log = logging.getLogger("reactorflow.rollback")


async def _count(ex: Execution, node: Node) -> int:
    record = ex.records[node.key]
    if record.status == StepStatus.COMPLETED:
        return int(msgspec.msgpack.decode(record.result))
    try:
        return len(await source_of(ex, node))
    except ArgumentError:
        return 0  # it never mapped anything


async def roll_back_map(ex: Execution, key: str) -> list[RollbackFailure]:
    """Roll map `key` back (see the module docstring); returns the failures."""
    node = ex.plan.nodes[key]
    options = node.spec.map
    assert options is not None
    count = await _count(ex, node)
    failures: list[RollbackFailure] = []
    completed = 0
    async for index, record in walk(ex.storage, ex.run_id, key, count):
        if record.status is StepStatus.FAILED and record.rollback_error is not None:
            failures.append(_failure(key, index, HandlerKind.COMPENSATE, record.rollback_error))
        elif record.status is StepStatus.COMPLETED and record.rollback_error is None:
            completed += 1
    base = _base_arguments(ex, node)
    map_record = ex.records[key]
    if node.spec.child is not None and completed:
        failures += await _undo_children(ex, node, count)
    elif options.undo_all is not None:
        if completed and map_record.rollback_error is None:
            failure = await _undo_all(ex, node, base, count)
            if failure is not None:
                failures.append(failure)
    elif node.spec.undo is not None and completed:
        failures += await _undo_each(ex, node, base, count)
    closed = msgspec.structs.replace(ex.records[key], status=StepStatus.UNDONE,
                                     compensate_pending=False)
    await ex.checkpoint(key, closed, [event("undo.completed", key)])
    return failures


async def _undo_children(ex: Execution, node: Node, count: int) -> list[RollbackFailure]:
    """Element reactors: undo each completed element's child run, highest index first."""

    async def undo_one(index: int, record: ElementRecord) -> None:
        await undo_child(ex, node, index)

    return await _undo_completed(ex, node, count, undo_one)


async def _undo_completed(ex: Execution, node: Node, count: int,
                          undo_one: Callable[[int, ElementRecord], Awaitable[None]]
                          ) -> list[RollbackFailure]:
    """Undo the completed elements, started highest index first: one at a time inline, at most
    `batch_size` at a time for a fanned-out map. Each outcome is stored in the element's slot
    as it returns; a failure is recorded and the rest goes on."""
    options = node.spec.map
    assert options is not None
    failures: list[tuple[int, RollbackFailure]] = []
    limiter = anyio.CapacityLimiter(options.batch_size if options.fan_out else 1)

    async def one(index: int, record: ElementRecord) -> None:
        try:
            try:
                await undo_one(index, record)
            except Exception as exc:
                log.warning("reactorflow.undo.failed run_id=%s step=%s index=%d error=%s",
                            ex.run_id, node.key, index, summary(exc))
                record.rollback_error = ErrorRecord.from_exception(exc)
                failures.append((index, _failure(node.key, index, HandlerKind.UNDO,
                                                 record.rollback_error)))
            else:
                record.status = StepStatus.UNDONE
            await ex.storage.save_elements(ex.run_id, node.key,
                                           {index: records.encode(record)}, replace=True)
        finally:
            limiter.release_on_behalf_of(index)

    async with anyio.create_task_group() as tg:
        async for index, record in walk(ex.storage, ex.run_id, node.key, count, backwards=True):
            if record.status is StepStatus.COMPLETED and record.rollback_error is None:
                await limiter.acquire_on_behalf_of(index)
                tg.start_soon(one, index, record)
    return [failure for _, failure in sorted(failures, key=lambda f: -f[0])]


def _base_arguments(ex: Execution, node: Node) -> dict[str, Any]:
    try:
        return resolve_arguments(ex, node)
    except ArgumentError:
        return {}


async def _undo_each(ex: Execution, node: Node, base: dict[str, Any],
                     count: int) -> list[RollbackFailure]:
    handler = node.spec.undo
    options = node.spec.map
    assert handler is not None and options is not None
    items = await source_of(ex, node)

    async def undo_one(index: int, record: ElementRecord) -> None:
        arguments = dict(base)
        arguments[options.element] = items[index]
        kwargs = {name: arguments[name] for name in handler.names if name in arguments}
        if handler.context_name is not None:
            kwargs[handler.context_name] = context(ex, node, index, record.attempts or 1)
        result = handler.fn(node.decoder.decode(record.result), **kwargs)
        if inspect.isawaitable(result):
            await result

    return await _undo_completed(ex, node, count, undo_one)


async def _undo_all(ex: Execution, node: Node, base: dict[str, Any],
                    count: int) -> RollbackFailure | None:
    options = node.spec.map
    assert options is not None and options.undo_all is not None
    handler = options.undo_all

    async def results() -> AsyncIterator[Any]:
        async for _, record in walk(ex.storage, ex.run_id, node.key, count):
            if record.status is StepStatus.COMPLETED and record.rollback_error is None:
                yield node.decoder.decode(record.result)

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
        await ex.checkpoint(node.key, failed, [event("undo_all.failed", node.key,
                                                     detail=summary(exc))])
        return RollbackFailure(node.key, HandlerKind.UNDO_ALL, describe(exc), type(exc).__name__)
    return None


def _failure(key: str, index: int, kind: HandlerKind, error: ErrorRecord) -> RollbackFailure:
    return RollbackFailure(key, kind, f"element {index} ({element_key(key, index)}): "
                           f"{error.message}", error.type)
