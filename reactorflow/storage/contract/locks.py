"""The storage contract for liveness locks: the lock a run's owner holds, that every fenced write
checks (part of `Storage`; see `storage/contract/storage.py`)."""

from __future__ import annotations

import abc


class LocksContract(abc.ABC):
    """Re-entrant (owner + count) locks with a TTL, named by a run id or a unit's key."""

    # -- liveness lock -------------------------------------------------------------------------
    # `run_id` names the lock: a run's own id for its liveness lock (the one fenced writes
    # check), or "<run id>:<step key>" for the lock of an async unit.

    @abc.abstractmethod
    async def acquire_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        """Take the run's lock, or re-enter it (count + 1) when `owner` already holds it.

        Sets the TTL to `ttl`. False, with nothing changed, when another owner holds it.

        Args:
            run_id: The lock's name: a run id, or `"<run id>:<step key>"` for an async unit's lock.
            owner: Who takes it.
            ttl: The lock's time to live, in seconds.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def extend_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        """Reset the TTL of a lock `owner` holds; False if it does not hold it (any more).

        Args:
            run_id: The lock's name (as for `acquire_lock`).
            owner: Who should hold it.
            ttl: The lock's time to live, in seconds.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def release_lock(self, run_id: str, owner: str) -> int:
        """Leave the lock once (count - 1, deleted at 0). Returns the count left, or -1 when
        `owner` did not hold it (nothing changed).

        Args:
            run_id: The lock's name (as for `acquire_lock`).
            owner: Who leaves it.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def lock_owner(self, run_id: str) -> str | None:
        """Who holds the run's lock now, if anyone.

        Args:
            run_id: The lock's name (as for `acquire_lock`).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
