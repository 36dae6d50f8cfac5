"""Map element slots in memory: one dict per map step on the run's record (they expire and are
evicted with the run). A mixin of `MemoryStorage`
(the contract is in `storage/contract/maps.py`)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from reactorflow import clock
from reactorflow.storage.contract.maps import check_ranges, claimable
from reactorflow.storage.contract.values import CLOSES_MAPS, Claim, ElementStart, SlotWrite
from reactorflow.storage.memory.records import _Run


class MemoryMaps:
    """`save_elements`, `settle_element`, `load_elements`, `count_elements` in memory."""

    _mutex: threading.Lock

    def _live(self, run_id: str, now: float) -> _Run | None:
        raise NotImplementedError  # MemoryStorage's

    def _fenced(self, run_id: str, owner: str, now: float) -> _Run:
        raise NotImplementedError  # MemoryStorage's

    def _take_lock(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        raise NotImplementedError  # MemoryStorage's

    async def save_elements(self, run_id: str, key: str, outcomes: Mapping[int, bytes], *,
                            replace: bool = False, owner: str | None = None
                            ) -> SlotWrite | None:
        now = clock.monotonic()
        with self._mutex:
            run = self._live(run_id, now)
            if run is None:
                return None
            if owner is not None:
                self._fenced(run_id, owner, now)  # LockLost unless `owner` holds the run
            slots = run.maps.setdefault(key, {})
            written = 0
            for index, record in outcomes.items():
                if replace or index not in slots:
                    slots[index] = bytes(record)
                    written += 1
            return SlotWrite(written, len(slots))

    async def settle_element(self, run_id: str, key: str, index: int, outcome: bytes, *,
                             control: str, stop: int | None = None,
                             advance: int | None = None,
                             claim: Claim | None = None) -> SlotWrite | None:
        now = clock.monotonic()
        with self._mutex:
            run = self._live(run_id, now)
            if run is None:
                return None
            slots = run.maps.setdefault(key, {})
            if index in slots:
                return SlotWrite(0, len(slots))
            slots[index] = bytes(outcome)
            fields = run.maps.setdefault(control, {})
            if stop is not None:
                fields.setdefault(stop, str(index).encode())
            closed = run.status in CLOSES_MAPS
            following, taken = None, 0
            if advance is not None and not closed:
                counter = int(fields.get(advance, b"0"))
                taken = 1 if claim is None else claimable(claim, counter, len(slots))
                if taken:
                    following = counter
                    fields[advance] = str(counter + taken).encode()
            return SlotWrite(1, len(slots), following, closed, taken)

    async def start_element(self, lock_id: str, owner: str, ttl: float, run_id: str,
                            ranges: Sequence[tuple[str, int, int]], *, starts: tuple[str, int],
                            stop: tuple[str, int]) -> ElementStart | None:
        check_ranges(ranges)
        now = clock.monotonic()
        with self._mutex:
            if not self._take_lock(lock_id, owner, ttl, now):
                return None
            run = self._live(run_id, now)
            maps = {} if run is None else run.maps
            (marks, index), (control, field) = starts, stop
            refused = run is None
            if run is not None and index not in maps.get(marks, {}):
                refused = run.status in CLOSES_MAPS or field in maps.get(control, {})
                if not refused:
                    maps.setdefault(marks, {})[index] = b"1"
            reads = [[maps.get(key, {}).get(i) for i in range(start, start + max(count, 0))]
                     for key, start, count in ranges]
            return ElementStart(reads, refused)

    async def refresh_elements(self, run_id: str, keys: Sequence[str]) -> None:
        return  # slots live on the run's record: they expire with it (never while it lives)

    async def clear_elements(self, run_id: str, owner: str, keys: Sequence[str]) -> None:
        now = clock.monotonic()
        with self._mutex:
            run = self._fenced(run_id, owner, now)
            for key in keys:
                run.maps.pop(key, None)

    async def load_elements(self, run_id: str, key: str, start: int,
                            count: int) -> list[bytes | None]:
        with self._mutex:
            run = self._live(run_id, clock.monotonic())
            slots = {} if run is None else run.maps.get(key, {})
            return [slots.get(i) for i in range(start, start + max(count, 0))]

    async def count_elements(self, run_id: str, key: str) -> int:
        with self._mutex:
            run = self._live(run_id, clock.monotonic())
            return 0 if run is None else len(run.maps.get(key, {}))
