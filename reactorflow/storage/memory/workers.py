"""The worker heartbeats of `MemoryStorage` (the contract: `storage/contract/workers.py`).

Mixed into `MemoryStorage`: every method runs under its one mutex, so each is atomic.
"""

from __future__ import annotations

import threading

from reactorflow.storage.contract.workers import PRUNE_LIMIT


class MemoryWorkers:
    """One heartbeat per worker, in memory."""

    _mutex: threading.Lock

    def _init_workers(self) -> None:
        self._heartbeats: dict[str, tuple[float, bytes]] = {}  # worker -> (expires, record)

    async def beat(self, worker: str, record: bytes, now: float, expires: float) -> None:
        with self._mutex:
            self._heartbeats[worker] = (float(expires), bytes(record))

    async def workers(self, now: float) -> list[bytes]:
        with self._mutex:
            expired = [w for w, (expires, _) in self._heartbeats.items() if expires <= now]
            for worker in expired[:PRUNE_LIMIT]:
                del self._heartbeats[worker]
            return [record for expires, record in self._heartbeats.values() if expires > now]

    async def drop_worker(self, worker: str) -> bool:
        with self._mutex:
            return self._heartbeats.pop(worker, None) is not None
