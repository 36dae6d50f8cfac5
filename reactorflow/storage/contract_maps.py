"""The storage contract for map element slots (part of `Storage`; see `storage/base.py`)."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from reactorflow.storage.values import SlotWrite


class MapSlotsContract(abc.ABC):
    """Element slots of map steps: one slot per element index, beside the run."""

    # -- map element slots ---------------------------------------------------------------------
    # A map step's element outcomes live beside the run, one slot per element index, never in
    # the run's step records: storing or reading an element costs the same whatever the map's
    # size, and elements run by workers write only their own slots (never the run).

    @abc.abstractmethod
    async def save_elements(self, run_id: str, key: str, outcomes: Mapping[int, bytes], *,
                            replace: bool = False) -> SlotWrite | None:
        """Store element outcomes of map `key` (element index -> record), all in one atomic
        call (one round trip however many are given; cost proportional to their number only).

        First wins per element: an index that already holds an outcome keeps it (a duplicate
        delivery, a re-run after a crash), unless `replace` (a rollback rewriting a completed
        element as undone). Unfenced: element jobs never hold the run's lock; safe to retry.
        Returns how many outcomes were written and how many the map now holds, or None (nothing
        written) when the run does not exist. Slots expire `retention` seconds after the map's
        last write (memory: with the run).

        Args:
            run_id: The run's id.
            key: The map step's key.
            outcomes: Element index -> encoded outcome.
            replace: Overwrite outcomes already stored (a rollback).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def load_elements(self, run_id: str, key: str, start: int,
                            count: int) -> list[bytes | None]:
        """The outcomes of elements `start` .. `start + count - 1` of map `key`, in index order
        (None for an element without one), in one round trip.

        Args:
            run_id: The run's id.
            key: The map step's key.
            start: The first element's index.
            count: How many elements.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    async def load_element_ranges(self, run_id: str,
                                  ranges: Sequence[tuple[str, int, int]]
                                  ) -> list[list[bytes | None]]:
        """Several `load_elements` reads of one run — (key, start, count) each — in one round
        trip where the backend can (the base class reads them one by one).

        Args:
            run_id: The run's id.
            ranges: `(map key, start, count)` for each read.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
        return [await self.load_elements(run_id, key, start, count)
                for key, start, count in ranges]

    @abc.abstractmethod
    async def count_elements(self, run_id: str, key: str) -> int:
        """How many elements of map `key` hold an outcome.

        Args:
            run_id: The run's id.
            key: The map step's key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
