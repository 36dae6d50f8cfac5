"""An interrupt reached: its waiting record (deadline, correlation id) and, once a payload is
claimed, the payload decoded with its schema."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow.definition.graph import join
from reactorflow.errors import ArgumentError, CorrelationConflict, SerializationError
from reactorflow.records import StepRecord, summary
from reactorflow.runtime.stepcall import read_input, resolve_arguments
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.execution import Execution


def claimed_payload(ex: Execution, node: Node) -> Any:
    """The interrupt's claimed payload (validated when it was claimed: decoded, not judged)."""
    options = node.spec.interrupt
    assert options is not None
    try:
        return msgspec.msgpack.decode(ex.claims[node.key], type=options.payload_type)
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
    now = time.time()
    record = ex.record(node.key)
    correlation = correlation_id(ex, node)
    if correlation is not None:
        mapped = await ex.storage.map_correlation(correlation, ex.run_id)
        if mapped != ex.run_id:
            raise CorrelationConflict(correlation, mapped, ex.run_id)
    deadline = record.deadline
    if deadline is None and options.timeout is not None:
        deadline = now + options.timeout
    return StepRecord(StepStatus.WAITING, started_at=record.started_at or now,
                      deadline=deadline, correlation_id=correlation)


def correlation_id(ex: Execution, node: Node) -> str | None:
    options = node.spec.interrupt
    assert options is not None
    template = options.correlation_id
    if template is None:
        return None
    try:
        if isinstance(template, str):
            return template.format_map(_Names(ex, node.level))
        kwargs = resolve_arguments(ex, node)
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
