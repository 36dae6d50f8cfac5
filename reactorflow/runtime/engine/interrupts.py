"""An interrupt reached: its waiting record (deadline, correlation id) and, once a payload is
claimed, the payload decoded with its schema."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import clock, pydantic_types
from reactorflow.definition.graph import join
from reactorflow.errors import ArgumentError, CorrelationConflict, SerializationError
from reactorflow.protection import fields
from reactorflow.records import StepRecord, summary
from reactorflow.runtime.engine.stepcall import arguments, read_input
from reactorflow.status import Status, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.storage.contract.storage import Storage


def claimed_payload(ex: Execution, node: Node) -> Any:
    """The interrupt's claimed payload (validated when it was claimed: decoded, not judged)."""
    options = node.spec.interrupt
    assert options is not None
    try:
        return pydantic_types.decode(ex.keys.open(fields.claim(node.key), ex.claims[node.key]),
                                     options.payload_type)
    except msgspec.DecodeError as exc:
        raise SerializationError(
            f"the claimed payload of interrupt {node.key!r} no longer decodes with its schema: "
            f"{exc}", run_id=ex.run_id, step=node.key, cause=exc) from exc


async def waiting_record(ex: Execution, node: Node) -> StepRecord:
    """The record of an interrupt that starts (or keeps) waiting; registers its correlation id.

    Raises `ArgumentError` when the correlation id cannot be built and `CorrelationConflict`
    when another run holds it.
    """
    options = node.spec.interrupt
    assert options is not None
    now = clock.now()
    record = ex.record(node.key)
    correlation = await correlation_id(ex, node)
    if correlation is not None:
        await take_correlation(ex, correlation)
    deadline = record.deadline
    if deadline is None and options.timeout is not None:
        deadline = now + options.timeout
    return StepRecord(StepStatus.WAITING, started_at=record.started_at or now,
                      deadline=deadline, correlation_id=correlation)


async def take_correlation(ex: Execution, correlation: str) -> None:
    """Map a correlation id of the run's reactor to the run, first wins.

    A mapping that names a run which has ended (or is gone) is stale: its run released it, or
    would have but for a crash. It is released (compare-and-delete) and the id is claimed again.
    Raises `CorrelationConflict` when a run that may still wait for a payload holds it."""
    storage = ex.storage
    mapped = await storage.map_correlation(ex.reactor, correlation, ex.run_id)
    if mapped != ex.run_id and await _ended(storage, mapped):
        await storage.release_correlation(ex.reactor, correlation, mapped)
        mapped = await storage.map_correlation(ex.reactor, correlation, ex.run_id)
    if mapped != ex.run_id:
        raise CorrelationConflict(correlation, mapped, ex.run_id)


async def _ended(storage: Storage, run_id: str) -> bool:
    head = await storage.load_head(run_id)
    if head is None:
        return True
    try:
        return Status(head.status).is_terminal
    except ValueError:  # an unreadable status: not known to have ended
        return False


async def correlation_id(ex: Execution, node: Node) -> str | None:
    options = node.spec.interrupt
    assert options is not None
    template = options.correlation_id
    if template is None:
        return None
    try:
        if isinstance(template, str):
            return template.format_map(_Names(ex, node.level))
        kwargs = await arguments(ex, node)
        return str(template(**{n: kwargs[n] for n in options.correlation_names}))
    except Exception as exc:
        raise ArgumentError(
            f"interrupt {node.key!r}: cannot build its correlation id: {summary(exc)}",
            run_id=ex.run_id, step=node.key, cause=exc,
        ) from exc


class _Names(dict[str, Any]):
    """Template fields: the level's inputs and its completed steps' results."""

    def __init__(self, ex: Execution, level: str) -> None:
        super().__init__()
        self.ex = ex
        self.level = level

    def __missing__(self, name: str) -> Any:
        key = join(self.level, name)
        if key in self.ex.plan.nodes:
            return self.ex.value_of(key)
        return read_input(self.ex.level_inputs[self.level], name)
