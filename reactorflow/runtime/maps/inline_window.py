"""An inline map (`fan_out=False`): its elements run in the run's process.

Algorithm, in order:

1. Resolve the map's arguments once (the element parameter aside) and the list it maps over;
   a map met again after a crash reads the outcomes already stored and runs only the elements
   without one (an atomic map with a stored failure fails at once).
2. Runners in a task group (at most `batch_size`, spawned as elements suspend: see `_Window`)
   take the next element in index order, run it (`children.call_any_element`: retries, timeout,
   compensate) and hand its outcome to the writer. So elements start in index order and at
   most `batch_size` are in flight.
3. The writer stores outcomes in the map's element slots, many per round trip: while one write
   is on its way, the outcomes finished meanwhile gather for the next (group commit), so the
   cost per element stays constant and below one round trip each.
4. Atomic map: the first element failure stops the runners from taking new elements; those in
   flight finish; the elements never started are stored `skipped`. The map then fails with that
   element's error (the caller records it and rolls back). Otherwise the map completes once
   every outcome is stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from reactorflow import records
from reactorflow.errors import RecordedError
from reactorflow.protection import sealing
from reactorflow.protection.fields import ERROR
from reactorflow.records import ElementRecord, ErrorRecord
from reactorflow.runtime.engine.map_reads import walk
from reactorflow.runtime.maps.children import call_any_element
from reactorflow.runtime.maps.elements import fence
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.execution import Execution


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
        self.pending[index] = records.encode(sealing.element(self.ex.keys, record))
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
            await self.ex.slots.save_elements(self.ex.run_id, self.key, batch,
                                              owner=fence(self.ex))  # fenced: LockLost if lost

    def close(self) -> None:
        self.closed = True
        self.wake.set()


class _Window:
    """Runners that take elements in index order, at most `size` at once. A runner about to
    start an element first makes sure a spare runner exists while elements are left (up to
    `size`): an element that suspends never holds back the next, and elements that finish
    without suspending cost no task each."""

    def __init__(self, todo: list[int], size: int) -> None:
        self.todo = todo
        self.size = size
        self.cursor = 0
        self.runners = 0
        self.idle = 0
        self.stopped = False
        self.tg: TaskGroup | None = None
        self.work: Callable[[int], Awaitable[None]] | None = None

    def open(self, tg: TaskGroup, work: Callable[[int], Awaitable[None]]) -> None:
        self.tg, self.work = tg, work
        self._spawn()

    def stop(self) -> None:
        self.stopped = True

    def left(self) -> list[int]:
        """The elements never started."""
        return self.todo[self.cursor:]

    def _more(self) -> bool:
        return self.cursor < len(self.todo) and not self.stopped

    def _spawn(self) -> None:
        if self._more() and self.runners < self.size and self.tg is not None:
            self.runners += 1
            self.idle += 1
            self.tg.start_soon(self._run)

    async def _run(self) -> None:
        assert self.work is not None
        try:
            while self._more():
                index = self.todo[self.cursor]
                self.cursor += 1
                self.idle -= 1
                if self.idle == 0:
                    self._spawn()
                try:
                    await self.work(index)
                finally:
                    self.idle += 1
        finally:
            self.runners -= 1
            self.idle -= 1


async def stored_outcomes(ex: Execution, node: Node, count: int) -> dict[int, ElementRecord]:
    """The outcomes a crashed execution of this map already stored."""
    return {index: record async for index, record in walk(ex.slots, ex.run_id, node.key, count)
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
                end.error = RecordedError(error.type, ex.keys.shown_text(ERROR, error.message),
                                          step=node.key)
                end.error_record, end.failed_index = error, index
        todo = [] if end.failed_index is not None else [i for i in todo if i not in done]
    writer = _Writer(ex, node.key)
    window = _Window(todo, options.batch_size)

    async def element(index: int) -> None:
        record, error = await call_any_element(ex, node, base, index, items[index])
        writer.add(index, record)
        if error is not None and options.atomic and end.failed_index is None:
            end.error, end.error_record, end.failed_index = error, record.error, index
            window.stop()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.run)
            async with anyio.create_task_group() as runners:
                window.open(runners, element)
            for index in window.left():  # an atomic map stopped: these never started
                writer.add(index, ElementRecord(StepStatus.SKIPPED))
            writer.close()
    except BaseExceptionGroup as group:
        raise _alone(group) from None
    return end


def _alone(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What cut an inline map off (a storage failure, an interruption, a process "killed" in
    an element), as it was raised: the one exception in the task groups' nesting that is not
    a cancellation, else the group itself."""
    cancelled = anyio.get_cancelled_exc_class()
    found: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        current = stack.pop()
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        elif not isinstance(current, cancelled):
            found.append(current)
    return found[0] if len(found) == 1 else group

