"""The timers of `MemoryStorage` (the contract: `storage/contract/timers.py`).

Mixed into `MemoryStorage`: every method runs under its one mutex, so each is atomic. The due
times are a heap with lazy deletion (an entry whose time no longer matches its run's timer is
dropped when it surfaces), so a claim pops only what is due.
"""

from __future__ import annotations

import heapq
import itertools
import threading

from reactorflow.storage.contract.values import DueTimer


class MemoryTimers:
    """One timer per run, in memory."""

    _mutex: threading.Lock

    def _init_timers(self) -> None:
        # run -> (time, reactor, due, version)
        self._timers: dict[str, tuple[float, str, float, int]] = {}
        self._timer_heap: list[tuple[float, int, str]] = []
        self._timer_seq = itertools.count()

    def _set_timer(self, run_id: str, time: float, reactor: str, due: float,
                   version: int) -> None:
        self._timers[run_id] = (time, reactor, due, version)
        heapq.heappush(self._timer_heap, (time, next(self._timer_seq), run_id))

    def _timer_top(self) -> tuple[float, str] | None:
        heap = self._timer_heap
        while heap:
            time, _, run_id = heap[0]
            current = self._timers.get(run_id)
            if current is not None and current[0] == time:
                return time, run_id
            heapq.heappop(heap)
        return None

    async def arm_timer(self, run_id: str, reactor: str, due: float, version: int = 1) -> None:
        with self._mutex:
            self._set_timer(run_id, float(due), reactor, float(due), version)

    async def disarm_timer(self, run_id: str, due: float | None = None) -> bool:
        with self._mutex:
            current = self._timers.get(run_id)
            if current is None or (due is not None and current[0] != due):
                return False
            del self._timers[run_id]
            return True

    async def claim_timers(self, now: float, lease: float, limit: int) -> list[DueTimer]:
        claimed: list[DueTimer] = []
        leased_until = now + lease
        with self._mutex:
            while len(claimed) < limit:
                top = self._timer_top()
                if top is None or top[0] > now:
                    break
                _, run_id = top
                _, reactor, due, version = self._timers[run_id]
                heapq.heappop(self._timer_heap)
                self._set_timer(run_id, leased_until, reactor, due, version)
                claimed.append(DueTimer(run_id, reactor, due, leased_until, version))
        return claimed

    async def next_timer(self) -> float | None:
        with self._mutex:
            top = self._timer_top()
        return None if top is None else top[0]

    async def timer_of(self, run_id: str) -> float | None:
        with self._mutex:
            current = self._timers.get(run_id)
        return None if current is None else current[0]
