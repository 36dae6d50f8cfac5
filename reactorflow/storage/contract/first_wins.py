"""The storage contract for global names that lead to one run, first wins: correlation ids and
idempotency keys (part of `Storage`; see `storage/contract/storage.py`)."""

from __future__ import annotations

import abc

from reactorflow.storage.contract.values import RunKey


class FirstWinsContract(abc.ABC):
    """Correlation ids and idempotency keys, each mapped to one run by the first caller."""

    @abc.abstractmethod
    async def map_correlation(self, reactor: str, correlation_id: str, run_id: str) -> str:
        """Map a correlation id of `reactor` to a run, first wins (each reactor has its own
        correlation ids). Returns the run id it maps to (equal to `run_id` when this call won
        or the mapping already was this run's). The mapping never expires: it lives as long as
        its run may wait for a payload, and the run releases it when it ends
        (`release_correlation`).

        Args:
            reactor: The reactor's name.
            correlation_id: The correlation id.
            run_id: The run that asks for the id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def resolve_correlation(self, reactor: str, correlation_id: str) -> str | None:
        """The run a correlation id of `reactor` maps to.

        Args:
            reactor: The reactor's name.
            correlation_id: The correlation id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def release_correlation(self, reactor: str, correlation_id: str, run_id: str) -> bool:
        """Remove the mapping of a correlation id of `reactor` if it maps to `run_id` (atomic
        compare-and-delete); True if it did. A mapping to another run is left alone.

        Args:
            reactor: The reactor's name.
            correlation_id: The correlation id.
            run_id: The run the mapping must name to be removed.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def claim_idempotency(self, reactor: str, key: str, run_id: str) -> str:
        """First-wins claim of a run idempotency key; returns the run id that holds it.

        The claim lives as long as its run (api.md §13: a replay of the start, however late,
        finds the run while it lives, and never starts a duplicate): it has no expiry while the
        run is being stored and while the run lives (`create_run(idempotency_key=key)` links
        them), and expires `retention` seconds after the write that ends the run (a write that
        makes it live again removes that expiry), and with the run's record when that is
        dropped. Memory does it in the run's own writes. Redis keeps the claim in another slot
        than the run (another master on a cluster): the run's record names it, the write that
        ends the run (or makes it live again) leaves a follow-up record in the run's slot, and
        the claim takes the run's expiry right after that write (`follow_idempotency`), or in
        the sweeper's record pass (`scan_records`) when a crash cut the writer off between the
        two. A claim whose claimer died before storing its run has no run to follow: the next
        start with the same key takes it over (`release_idempotency`).

        Args:
            reactor: The reactor's name.
            key: The idempotency key.
            run_id: The run that asks for the key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def release_idempotency(self, reactor: str, key: str, run_id: str) -> bool:
        """Remove an idempotency claim if `run_id` holds it (atomic compare-and-delete); True
        if it did (a claim whose claimer died before storing its run is taken over this way).

        Args:
            reactor: The reactor's name.
            key: The idempotency key.
            run_id: The run the claim must name to be removed.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def remember_correlation(self, reactor: str, correlation_id: str, run_id: str) -> None:
        """After run `run_id` ended and released its correlation id: remember that the id led
        to it, for a search (`find_by_key`) to find the ended run. The record expires with the
        run (its retention; nothing is written for a run that is gone or has not ended) and is
        no first-wins mapping: the latest ended run that had the id replaces it, and a live
        mapping of the id wins over it in a search. Idempotent; best effort (a lost record only
        makes an ended run harder to find).

        Args:
            reactor: The run's reactor.
            correlation_id: The correlation id its interrupt registered.
            run_id: The run, which has ended.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def find_by_key(self, kind: RunKey, key: str, reactor: str | None) -> dict[str, str]:
        """The runs a business key leads to, by reactor (`{reactor: run id}`), read from the
        first-wins mappings above (never a scan: on Redis one read of the reactor set when
        `reactor` is None, then one GET per reactor, in one round trip). Each reactor has its
        own keys, so a key may lead to one run in each. The answer is a hint the caller
        verifies against the run (a claim whose claimer died before storing its run names no
        stored run). A correlation id leads to its run only while the mapping lives: from the
        interrupt that registered it until the run ends (`release_correlation`), then, through
        the record `remember_correlation` leaves, until the ended run expires (a live mapping
        of the id wins); an idempotency key leads to its run as long as the run lives
        (`claim_idempotency`).

        Args:
            kind: Which mapping to read (`RunKey`).
            key: The correlation id or the idempotency key.
            reactor: Only this reactor's mapping (`None`: every reactor's).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
