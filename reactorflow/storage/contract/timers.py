"""The storage contract for timers (part of `Storage`; see `storage/contract/storage.py`).

A timer is the moment a run is to be looked at again: a sleep's deadline, an interrupt's
deadline, a parked retry's next attempt. Each run has at most one (the earliest thing it waits
for: arming again moves it). Timers are an index of due times, kept durably with the runs and
never expired by retention (api.md §13): a run's timer lives until it is fired or disarmed.

Firing is a first-wins claim with a lease (`claim_timers`): of any number of concurrent
firers, one gets each due timer; it enqueues the run's resume durably and then disarms the
timer, compare-and-delete on the lease it took (`disarm_timer(due=...)`), so a timer the run
armed again meanwhile (it parked anew) stays. A firer that dies between its claim and its
disarm leaves the timer leased: once the lease runs out it is due again and another firer
takes it (the resume may then be enqueued twice; the run's own fencing makes the second one
write nothing). Claiming reads only what is due: its cost does not grow with the number of
timers not yet due.
"""

from __future__ import annotations

import abc

from reactorflow.storage.contract.values import DueTimer


class TimersContract(abc.ABC):
    """One timer per run: when to look at it again."""

    @abc.abstractmethod
    async def arm_timer(self, run_id: str, reactor: str, due: float, version: int = 1) -> None:
        """Set the timer of run `run_id` (of `reactor`) to `due`, replacing the one it had
        (atomic; idempotent). Not fenced: a stale arm only makes a firer look at the run once
        more, which writes nothing when nothing is due. No expiry.

        Args:
            run_id: The run.
            reactor: Its reactor's name (what a firer enqueues the resume with).
            due: When it falls due (Unix time, seconds).
            version: The version of its reactor the run is on (the resume carries it).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def disarm_timer(self, run_id: str, due: float | None = None) -> bool:
        """Remove the run's timer; with `due`, only while it is still set to exactly that time
        (atomic compare-and-delete: a firer's disarm after its claim leaves a timer that was
        armed again since). True if one was removed.

        Args:
            run_id: The run.
            due: The time the timer must have to be removed (a claim's `leased_until`), or None.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def claim_timers(self, now: float, lease: float, limit: int) -> list[DueTimer]:
        """Claim up to `limit` timers due at `now` (due <= now), earliest first: each one's
        time moves to `now + lease` in the same atomic write, so a concurrent claim does not
        get it until that lease runs out (first wins). The work is proportional to the timers
        returned, not to the timers stored.

        Args:
            now: The time to claim at (Unix time, seconds).
            lease: Seconds the claimer has to enqueue the resume and disarm the timer (> 0).
            limit: At most this many (>= 1).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def next_timer(self) -> float | None:
        """The earliest due time of any timer (a claimed one's: its lease's end), or None.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def timer_of(self, run_id: str) -> float | None:
        """When the run's timer falls due (a claimed one's: its lease's end), or None.

        Args:
            run_id: The run.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
