"""`rf.MapResults[T]`: a lazy view of a map step's element outcomes, paged from storage.

A step that annotates its parameter `rf.MapResults[T]` receives one instead of a list: `len()` is
the element count, and each `async for` walks the outcomes in element order, a page at a time,
so that reading a map of any size never loads all of its results at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from reactorflow.markers import Outcome

T = TypeVar("T")

PAGE_SIZE = 500
"""Element outcomes read per storage round trip while iterating."""

PageLoader = Callable[[int, int], Awaitable[Sequence[Outcome[T]]]]
"""Reads `count` outcomes starting at element `start` (fewer at the end of the map)."""


class MapResults(Generic[T]):
    """The outcomes of a map's elements, in element order, read lazily (may be iterated more
    than once). Each item is an `rf.Outcome[T]`: `ok`, `value`, `error`.

    Annotate a parameter that reads a map step `rf.MapResults[T]` to receive this: `len()` is
    the element count; `async for outcome in results` walks every element's outcome, paged from
    storage; `values()` iterates the completed elements' results only. The engine builds it;
    see [Maps](maps.md#reading-a-maps-results).

    Args:
        step: The map step's name.
        length: The number of elements.
        load: Reads `count` outcomes starting at element `start`.
        page_size: Outcomes read per storage round trip.
    """

    __slots__ = ("_length", "_load", "_page_size", "step")

    def __init__(self, step: str, length: int, load: PageLoader[T], *,
                 page_size: int = PAGE_SIZE) -> None:
        self.step = step
        self._length = length
        self._load = load
        self._page_size = page_size

    def __len__(self) -> int:
        return self._length

    def __aiter__(self) -> AsyncIterator[Outcome[T]]:
        return self._walk()

    async def _walk(self) -> AsyncIterator[Outcome[T]]:
        for start in range(0, self._length, self._page_size):
            for outcome in await self._load(start, min(self._page_size, self._length - start)):
                yield outcome

    async def values(self) -> AsyncIterator[T]:
        """The results of the elements that completed, in element order."""
        async for outcome in self:
            if outcome.ok:
                yield outcome.value  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"<MapResults of {self.step!r}: {self._length} elements>"
