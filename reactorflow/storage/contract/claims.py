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

    async def claim_and_lock(self, run_id: str, name: str, payload: bytes, *, owner: str,
                             lock_ttl: float, then: Resumption | None = None,
                             check: ResumeCheck | None = None,
                             ) -> tuple[ClaimResult, StoredRun | None]:
        """`check` (if given: else nothing is checked first), then `claim`, then, if it was
        accepted, `acquire_lock(run_id, owner, lock_ttl)`, then, if the lock was taken, the
        status write `then` (when the run is still as it describes; with `check`, the one the
        check makes), then `load_run(run_id, history=True, claims=True)`: what `continue_` does
        first, in one call. Redis does it all in one script (one round trip); this default makes
        the calls in turn.

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
        if check is not None:
            head = await self.load_head(run_id)
            if head is None or not check.admits(head, name):
                return ClaimResult.REFUSED, None if head is None else StoredRun(head, {})
            then = check.resumption(head, name)
        outcome = await self.claim(run_id, name, payload)
        if outcome is not ClaimResult.ACCEPTED or not await self.acquire_lock(run_id, owner,
                                                                               lock_ttl):
            return outcome, None
        stored = await self.load_run(run_id, history=True, claims=True)
        if (then is not None and stored is not None
                and stored.head.status == then.previous_status
                and stored.head.state == then.expected_state
                and not any(k in (stored.claims or {}) for k in then.unclaimed)):
            await self.save_state(run_id, owner, status=then.status,
                                  previous_status=then.previous_status, state=then.state,
                                  events=then.events)
            stored = await self.load_run(run_id, history=True, claims=True)
        return outcome, stored

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
