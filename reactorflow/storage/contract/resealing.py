"""The storage contract for re-sealing a run's stored values under another key (a key rotation,
`reactorflow keys rotate`; part of `Storage`, see `storage/contract/storage.py`).

A rotation rewrites records it read, each with the same clear values sealed anew. It holds no
run lock (a run in flight keeps running): each record is replaced by compare-and-set, so a
record the run rewrote since the rotation read it is never overwritten with older content.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Swap = tuple[bytes, bytes]
"""(the bytes read, the bytes that replace them)."""


@dataclass(frozen=True, slots=True)
class Reseal:
    """The records of one run to replace, each as a `Swap`.

    Attributes:
        head: Head fields (`"meta"`, `"state"`) -> swap.
        steps: Step key -> swap of its record.
        claims: Interrupt key -> swap of its claimed payload.
        elements: Map step key -> element index -> swap of its slot.
        events: Swaps of history events (each found by its bytes; one the history dropped
            meanwhile is skipped, not a mismatch).
    """

    head: Mapping[str, Swap] = field(default_factory=dict)
    steps: Mapping[str, Swap] = field(default_factory=dict)
    claims: Mapping[str, Swap] = field(default_factory=dict)
    elements: Mapping[str, Mapping[int, Swap]] = field(default_factory=dict)
    events: Sequence[Swap] = ()

    def __bool__(self) -> bool:
        return bool(self.head or self.steps or self.claims or self.elements or self.events)


class ResealContract(abc.ABC):
    """Replace a run's records by compare-and-set (a key rotation)."""

    @abc.abstractmethod
    async def reseal_run(self, run_id: str, reseal: Reseal) -> bool:
        """Replace the records `reseal` names, all or none, in one atomic step: True when every
        record still held the bytes read (a history event the history dropped meanwhile is
        skipped) and all were replaced; False, writing nothing, when one changed (the run
        wrote it: read the run again) or the run is gone. Unfenced (no lock is taken or
        needed), and it touches no status, index, lock, expiry or history order.

        Args:
            run_id: The run's id.
            reseal: The records to replace, each with the bytes read.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
