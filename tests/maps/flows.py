"""The map saga the map tests share: a step, a map (inline or fanned out) with compensate and
undo (or undo_all), and a reader that may fail late; plus a window counting elements in
flight (across worker threads)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

import anyio
import msgspec

import reactorflow as rf
from tests.helpers import unique


class Batch(msgspec.Struct):
    tag: str
    items: list[int]
    fail: list[int] = []
    late: bool = False


class Window:
    """Elements in flight and the peak; `started` in the order elements started."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.started: list[int] = []

    async def enter(self, item: int) -> None:
        with self.lock:
            self.started.append(item)
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            await anyio.sleep(0)
            await anyio.sleep(0.001 * (item % 3))
        finally:
            with self.lock:
                self.now -= 1


def saga(*, fan_out: bool = False, batch_size: int = 4, atomic: bool = True,
         undo_all: bool = False, retries: rf.Retry | None = None
         ) -> tuple[rf.Reactor, list[str], Window]:
    log: list[str] = []
    window = Window()
    flow = rf.Reactor(unique("map"), inputs=Batch)

    @flow.step
    async def prepare(tag: str) -> str:
        log.append("prepare")
        return f"p-{tag}"

    @prepare.undo
    async def unprepare(result: str) -> None:
        log.append(f"unprepare:{result}")

    @flow.map_step(over="items", batch_size=batch_size, atomic=atomic, retries=retries,
                   fan_out=fan_out)
    async def square(item: int, prepare: str, fail: list[int]) -> int:
        await window.enter(item)
        if item in fail:
            raise ValueError(f"element {item} broke")
        return item * item

    @square.compensate
    async def compensate_square(error: Exception, item: int) -> None:
        log.append(f"compensate:{item}:{error}")

    if undo_all:
        @square.undo_all
        async def unsquare_all(results: AsyncIterator[int], prepare: str) -> None:
            log.append(f"undo_all:{prepare}:{[r async for r in results]}")
    else:
        @square.undo
        async def unsquare(result: int, item: int) -> None:
            log.append(f"undo:{item}:{result}")

    if atomic:
        @flow.step
        async def total(square: list[int], late: bool) -> int:
            if late:
                raise RuntimeError("later step broke")
            return sum(square)
    else:
        @flow.step
        async def total(square: list[rf.Outcome[int]], late: bool) -> int:  # type: ignore[misc]
            return sum(o.value for o in square if o.ok and o.value is not None)

    return flow, log, window
