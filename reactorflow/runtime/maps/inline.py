"""An inline map (`fan_out=False`): its elements run in the run's process.

Algorithm, in order:

1. Resolve the map's arguments once (the element parameter aside) and the list it maps over;
   a map met again after a crash reads the outcomes already stored and runs only the elements
   without one (an atomic map with a stored failure fails at once).
2. Start `batch_size` runners in a task group (fewer if fewer elements are left). Each takes the
   next element in index order, runs it (`elements.call_element`: retries, timeout, compensate)
   and hands its outcome to the writer. So elements start in index order and at most
   `batch_size` are in flight.
3. The writer stores outcomes in the map's element slots, many per round trip: while one write
   is on its way, the outcomes finished meanwhile gather for the next (group commit), so the
   cost per element stays constant and below one round trip each.
4. Atomic map: the first element failure stops the runners from taking new elements; those in
   flight finish; the elements never started are stored `skipped`. The map then fails with that
   element's error (the caller records it and rolls back). Otherwise the map completes once
   every outcome is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from reactorflow import records
from reactorflow.errors import RecordedError
from reactorflow.records import ElementRecord, ErrorRecord
from reactorflow.runtime.maps.elements import call_element
from reactorflow.runtime.maps.reading import walk
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.execution import Execution


@dataclass(slots=True)
class MapEnd:
    """How a map's elements ended: `error` is the first failure of an atomic map."""

    count: int
    error: BaseException | None = None  # the live exception, when it failed in this process
    error_record: ErrorRecord | None = None
    failed_index: int | None = None


class _Writer:
    """Stores element outcomes, batching those that finish while a write is on its way."""

    def __init__(self, ex: Execution, key: str) -> None:
        self.ex = ex
        self.key = key
        self.pending: dict[int, bytes] = {}
        self.wake = anyio.Event()
        self.closed = False

    def add(self, index: int, record: ElementRecord) -> None:
        self.pending[index] = records.encode(record)
        self.wake.set()

    async def run(self) -> None:
        while True:
            if not self.pending:
                if self.closed:
                    return
                await self.wake.wait()
                self.wake = anyio.Event()
                continue
            batch, self.pending = self.pending, {}
            await self.ex.storage.save_elements(self.ex.run_id, self.key, batch)

    def close(self) -> None:
        self.closed = True
        self.wake.set()


async def stored_outcomes(ex: Execution, node: Node, count: int) -> dict[int, ElementRecord]:
    """The outcomes a crashed execution of this map already stored."""
    return {index: record async for index, record in walk(ex.storage, ex.run_id, node.key, count)
            if record.error is not None or record.status is not StepStatus.SKIPPED}


async def run_inline(ex: Execution, node: Node, base: dict[str, Any],
                     items: list[Any] | tuple[Any, ...], *, resumed: bool) -> MapEnd:
    """Run the map's elements in this process (see the module docstring)."""
    options = node.spec.map
    assert options is not None
    count = len(items)
    end = MapEnd(count)
    todo = list(range(count))
    if resumed:
        done = await stored_outcomes(ex, node, count)
        for index, record in sorted(done.items()):
            if options.atomic and record.status is StepStatus.FAILED and end.failed_index is None:
                error = record.error or ErrorRecord("Exception", "")
                end.error = RecordedError(error.type, error.message, step=node.key)
                end.error_record, end.failed_index = error, index
        todo = [] if end.failed_index is not None else [i for i in todo if i not in done]
    writer = _Writer(ex, node.key)
    cursor = 0

    async def runner() -> None:
        nonlocal cursor
        while cursor < len(todo) and end.failed_index is None:
            index = todo[cursor]
            cursor += 1
            record, error = await call_element(ex, node, base, index, items[index])
            writer.add(index, record)
            if error is not None and options.atomic and end.failed_index is None:
                end.error, end.error_record, end.failed_index = error, record.error, index

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        async with anyio.create_task_group() as runners:
            for _ in range(min(options.batch_size, len(todo))):
                runners.start_soon(runner)
        for index in todo[cursor:]:  # an atomic map stopped: these never started
            writer.add(index, ElementRecord(StepStatus.SKIPPED))
        writer.close()
    return end

