"""The element slots of the maps inside an element reactor's element (a map nested in an
element): held in memory with the element's step records, never beside the run. They follow
the storage contract's first-wins / `replace` rule (`MapSlotsContract.save_elements`), so the
map code reads and writes them as it does a run's slots (`Execution.slots`).

The element stores them in its own slot (`ElementRecord.maps`) when it settles completed, and
while its rollback runs, after each write (`after`): an undo cut off resumes after the last
saved one, as for the element's own child steps.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping


class HeldSlots:
    """Map key -> element index -> encoded outcome, in memory."""

    def __init__(self, maps: Mapping[str, Mapping[int, bytes]] | None = None) -> None:
        self.maps: dict[str, dict[int, bytes]] = {key: dict(slots)
                                                  for key, slots in (maps or {}).items()}
        self.after: Callable[[], Awaitable[None]] | None = None  # called after each write

    async def save_elements(self, run_id: str, key: str, outcomes: Mapping[int, bytes], *,
                            replace: bool = False, owner: str | None = None) -> None:
        """Store outcomes, first wins per index unless `replace` (as the storage contract).

        Args:
            run_id: The run's id (unused: these slots belong to one element of it).
            key: The nested map's key in the element reactor's plan.
            outcomes: Element index -> encoded outcome.
            replace: Overwrite outcomes already held (a rollback).
            owner: Unused: these slots live in the element's own memory (the element stores
                them with its slot, which is fenced as its writer's are).
        """
        slots = self.maps.setdefault(key, {})
        for index, raw in outcomes.items():
            if replace or index not in slots:
                slots[index] = raw
        if self.after is not None:
            await self.after()

    async def load_elements(self, run_id: str, key: str, start: int,
                            count: int) -> list[bytes | None]:
        """The outcomes of elements `start` .. `start + count - 1` (None: none held).

        Args:
            run_id: The run's id (unused).
            key: The nested map's key.
            start: The first element's index.
            count: How many elements.
        """
        slots = self.maps.get(key, {})
        return [slots.get(index) for index in range(start, start + count)]
