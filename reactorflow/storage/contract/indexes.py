"""The storage contract for finding runs: listing them, and the sweeper's scans and repairs of
the indexes (part of `Storage`; see `storage/contract/storage.py`)."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from reactorflow.storage.contract.values import Liveness, RunPageData, UnitLiveness


class IndexesContract(abc.ABC):
    """Runs listed and scanned from the indexes (hints readers verify), and the record pass."""

    # -- listing and sweeping ------------------------------------------------------------------

    @abc.abstractmethod
    async def list_runs(
        self, reactor: str | None, status: str | None, limit: int, cursor: str | None, *,
        since: float | None = None, until: float | None = None,
    ) -> RunPageData:
        """Runs of a reactor (of every reactor when `reactor` is None), newest first (by
        `created_at`, then run id), optionally of one status and created in a time range, from
        the indexes (never a keyspace scan: the indexes are ordered by `created_at`, so a range
        is read from its newest end and stops at its oldest). `cursor` is a `next_cursor` of an
        earlier call (None for the first page); pages neither repeat nor skip runs. Another
        string raises `ReactorflowError`.

        Args:
            reactor: Only this reactor's runs (`None`: every reactor's).
            status: Only runs of this status (`None`: any).
            limit: Runs per page.
            cursor: An earlier page's `next_cursor` (`None`: the first page).
            since: Only runs created at or after this Unix time (inclusive; `None`: no bound).
            until: Only runs created before this Unix time (exclusive; `None`: no bound).

        Raises:
            ReactorflowError: A cursor this backend did not return.
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def count_runs(self) -> dict[tuple[str, str], int]:
        """How many runs each reactor has in each status, keyed `(reactor, status)`, read from
        the status indexes (never a keyspace scan; on Redis one ZCARD per reactor and status,
        in one round trip). Counts are hints as the indexes are: a run that expired or moved
        may still be counted until a read or the sweeper drops its entry. A pair with no run
        may be left out.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def scan_units(self, limit: int) -> list[UnitLiveness]:
        """Dispatched async units not yet reported (from the unit index, oldest first), with
        the holder of each unit's lock ("<run id>:<key>"). One whose lock cannot be read is
        returned with `problem` set instead of failing the scan.

        Args:
            limit: The most units returned.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def scan_status(self, statuses: Sequence[str], limit: int) -> list[Liveness]:
        """At most `limit` runs of any reactor whose status is one of `statuses`, with lock and
        touch times, read from the status index (never a keyspace scan), in no promised
        order; when more match, from a random start (`rotation`), so that repeated calls see
        them all. A run whose record cannot be read (a field of the wrong type or value, an
        unknown status) is returned with `problem` set instead of failing the scan.

        Args:
            statuses: The statuses to look for.
            limit: The most runs returned.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def scan_records(self, limit: int) -> list[Liveness]:
        """The slow pass behind the indexes: read the next stretch, about `limit` run records,
        of a walk over every stored run (the records themselves, not the indexes), resumed where
        this storage object's last call stopped and started again once it went round. Each run
        that is running, rolling back or paused, or that carries a repair record (an index
        write of its that may have been cut off), gets its index entries written again
        (idempotent) and its repair record cleared. Returns the running, rolling-back and
        paused runs among them whose status index lacked them (as `scan_status` would have
        returned them), and those whose record cannot be read, with `problem` set. A backend
        whose index writes are atomic with the run finds none. A run (of any status) whose
        idempotency claim was left without the run's expiry by a writer cut off after its status
        write has its claim follow (see `claim_idempotency`).

        Args:
            limit: About the most run records read (a backend reads its batches whole).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def repair_index(self, run_id: str) -> bool:
        """Write the run's index entries again, as its record says (its status, its reactor;
        idempotent), and clear its repair record. True when its status entry was missing (the
        indexes did not lead to it); False when it was there, or the run does not exist.

        Args:
            run_id: The run's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
