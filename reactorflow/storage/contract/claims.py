"""The storage contract for what other callers write into a run: control requests, interrupt
claims and counters (part of `Storage`; see `storage/contract/storage.py`)."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from reactorflow.storage.contract.locks import LocksContract
from reactorflow.storage.contract.runs import RunsContract
from reactorflow.storage.contract.values import ClaimResult, ResumeCheck, Resumption, StoredRun


class ClaimsContract(RunsContract, LocksContract, abc.ABC):
    """Control requests, first-wins interrupt claims and counters; `claim_and_lock` composes them
    with the runs and locks contracts, which it therefore extends."""

    # -- control requests ----------------------------------------------------------------------

    @abc.abstractmethod
    async def request_control(self, run_id: str, control: bytes) -> bool:
        """Store a request (cancel, fail) for the run's owning execution; first request wins.

        Unfenced: anyone may ask. False when a request is already pending or the run is gone.

        Args:
            run_id: The run's id.
            control: The encoded request.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    # -- interrupts ----------------------------------------------------------------------------

    @abc.abstractmethod
    async def claim(self, run_id: str, name: str, payload: bytes) -> ClaimResult:
        """First-wins claim of interrupt `name`'s one payload.

        Atomic with a check that the run exists, is `paused` or `running`, and has no pending
        control request (see `request_control`). The checks run in this order: a missing run is
        NOT_RESUMABLE; an existing claim is TAKEN whatever the status; then the status and
        control checks. Claims are never deleted; they expire with the run.

        Args:
            run_id: The run's id.
            name: The interrupt's key.
            payload: The encoded payload.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def claim_and_lock(self, run_id: str, name: str, payload: bytes, *, owner: str,
                             lock_ttl: float, then: Resumption | None = None,
                             check: ResumeCheck | None = None, events: Sequence[bytes] = (),
                             ) -> tuple[ClaimResult, StoredRun | None]:
        """`check` (if given: else nothing is checked first), then `claim`, then, if it was
        accepted, `acquire_lock(run_id, owner, lock_ttl)`, then, if the lock was taken, the
        status write `then` (when the run is still as it describes; with `check`, the one the
        check makes), then `load_run(run_id, history=True, claims=True)`: what `continue_` does
        first, in one atomic call (Redis: one script, one round trip).

        `events` are appended to the run's history with the claim, in the same atomic write,
        when this call makes the claim and no status write of its own (the status write's own
        events say the same: `then.events`, `check.events`): the lock is held by another
        owner, or the run is not (or no longer) as `then` or `check` would write it. Never for
        a claim not accepted (nothing is written then), nor again for a retry of a call that
        claimed. The history keeps its newest `history_limit` events, as every append does.

        Args:
            run_id: The run's id.
            name: The interrupt's key.
            payload: The encoded payload.
            owner: Who takes the lock.
            lock_ttl: Seconds the lock lives unless extended.
            then: A status write to make under the new lock, only if the run's status, state
                and claims are still as it expects (see `Resumption`); else nothing is written
                and the caller sees the run as it is.
            check: What must hold before anything is claimed (see `ResumeCheck`; not with
                `then`). A retry of a call that claimed skips it (it answers as that call did).
            events: Encoded history events written with the claim when no status write is
                made (the audit of who gave a payload another execution applies).

        Returns:
            The claim's outcome, and the run as `load_run` reads it (after the status write,
            if it was made) when the claim was accepted and `owner` now holds the lock (None
            otherwise: another owner holds it, or the claim was not accepted, and then no lock
            was taken and nothing else written). `REFUSED` when `check` failed: nothing was
            written, and the run is returned with its head only (no steps; None when the run
            does not exist), for the caller to say why.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    async def lock_and_load(self, run_id: str, owner: str, ttl: float
                            ) -> tuple[bool, StoredRun | None]:
        """Take the run's lock (as `acquire_lock`) and, when taken, read the run with its
        history and claims (as `load_run`): lock, then load, in one call (a worker taking a run
        on: one round trip on Redis, atomic there). The read sees the run as it was when the
        lock was taken.

        Args:
            run_id: The run's id (its liveness lock).
            owner: Who takes the lock.
            ttl: The lock's time to live, in seconds.

        Returns:
            Whether `owner` holds the lock now, and the run as `load_run` reads it (None when
            the lock was not taken: another owner holds it, nothing was read or changed; or
            when the run does not exist).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
        if not await self.acquire_lock(run_id, owner, ttl):
            return False, None
        return True, await self.load_run(run_id, history=True, claims=True)

    @abc.abstractmethod
    async def claims(self, run_id: str) -> dict[str, bytes]:
        """Every claim of the run (applied or not).

        Args:
            run_id: The run's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def forget_claims(self, run_id: str, owner: str, names: Sequence[str]) -> None:
        """Fenced removal of the claims and counters named `names` (interrupts a rewind makes
        wait again: a new payload is accepted, and its attempts count from zero); atomic, and
        idempotent (a name without a claim or counter is fine). Refused with `LockLost`
        (nothing removed) unless `owner` holds the run's lock.

        Args:
            run_id: The run's id.
            owner: The lock owner making the write.
            names: The interrupt keys whose claims and counters go.

        Raises:
            LockLost: `owner` does not hold the run's lock (nothing was removed).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def incr_counter(self, run_id: str, name: str) -> int:
        """Atomically add one to the run's counter `name` and return the new value; 0 (nothing
        written) when the run does not exist.

        Args:
            run_id: The run's id.
            name: The counter's name.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
