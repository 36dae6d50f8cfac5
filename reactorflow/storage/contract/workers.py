"""The storage contract for worker heartbeats (part of `Storage`; see
`storage/contract/storage.py`).

Every worker process publishes a heartbeat: one record per worker (opaque bytes; the runtime
encodes them with msgspec), replaced by each beat, and live until the expiry the beat gave it
(3 heartbeat intervals after it). A heartbeat that expired is gone: it is never listed again,
and the storage removes it (`workers` drops what expired, bounded per call; a Redis namespace
whose workers are all gone drops its keys when the last expiry passes). A worker that stops
cleanly drops its own heartbeat (`drop_worker`). Heartbeats are not runs: retention does not
apply, and nothing is fenced (each worker writes only its own record).
"""

from __future__ import annotations

import abc

PRUNE_LIMIT = 100
"""Expired heartbeats a call to `workers` removes at most (the rest go on the next call)."""


class WorkersContract(abc.ABC):
    """One heartbeat per live worker process."""

    @abc.abstractmethod
    async def beat(self, worker: str, record: bytes, now: float, expires: float) -> None:
        """Store the heartbeat of `worker`, replacing its previous one, live until `expires`
        (atomic: the record and its expiry are written together; idempotent).

        Args:
            worker: The worker's id (unique per process and start).
            record: Its heartbeat record (opaque bytes).
            now: The time of the beat (Unix time, seconds).
            expires: When the heartbeat is gone unless beaten again (Unix time, > `now`).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def workers(self, now: float) -> list[bytes]:
        """The records of the heartbeats live at `now` (expiry after `now`), in no order;
        heartbeats expired at `now` are removed in the same atomic step (at most `PRUNE_LIMIT`
        of them; an expired one is never returned either way).

        Args:
            now: The time to read at (Unix time, seconds).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def drop_worker(self, worker: str) -> bool:
        """Remove the heartbeat of `worker` (a worker stopping cleanly); True if it had one.

        Args:
            worker: The worker's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
