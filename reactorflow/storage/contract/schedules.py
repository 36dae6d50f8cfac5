"""The storage contract for schedules (part of `Storage`; see `storage/contract/storage.py`)."""

from __future__ import annotations

import abc

from reactorflow.storage.contract.values import ScheduleState


class SchedulesContract(abc.ABC):
    """One record per schedule: its cursor, paused flag, last run and last error."""

    # -- schedules -----------------------------------------------------------------------------
    # A schedule's key is "<reactor>:<schedule name or index>". Its record holds a cursor (the
    # last tick handled, in ms), a paused flag, the last run, the last error and the pending
    # ticks: claimed, their run not yet recorded, each with a lease (expiry, ms). A tick is
    # claimed and made pending in one atomic write (`schedule_advance`), finished and cleared
    # in another (`schedule_record`); a pending tick whose lease expired (its claimer died) is
    # taken over by one caller (`schedule_relet`). Every operation is atomic and touches that
    # one record: constant work per tick, whatever the number of runs stored.

    @abc.abstractmethod
    async def schedule_load(self, key: str, start: int | None) -> ScheduleState | None:
        """The schedule's state; when it has none, create it with cursor `start` (atomically:
        of two first loads, the first start wins) unless `start` is None (then: None).

        Args:
            key: The schedule's key.
            start: The cursor of a schedule seen for the first time (ms), or None to only read.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def schedule_advance(self, key: str, expected: int, cursor: int,
                               lease: int = 0) -> bool:
        """Claim the ticks up to `cursor`: move the cursor from `expected` to `cursor` iff it is
        still `expected` and the schedule is not paused (atomic compare-and-set: of concurrent
        claims of one tick, exactly one wins); with a `lease`, record the tick `cursor` as
        pending until `lease` in the same atomic write. True if this call moved it.

        Args:
            key: The schedule's key.
            expected: The cursor the caller read.
            cursor: The tick claimed (ms).
            lease: When the claim of a tick whose run is to be started lapses (ms): another
                caller may finish the tick after it (`schedule_relet`). 0: nothing pending (a
                skipped tick).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def schedule_record(self, key: str, *, last_run: str = "", error: str = "",
                              tick: int | None = None) -> None:
        """Record what a claimed tick did: the run it started (`last_run`, clearing the
        error) or its problem (`error`), and clear the pending tick `tick` in the same atomic
        write. A missing schedule is left missing.

        Args:
            key: The schedule's key.
            last_run: The run started.
            error: Why no run started.
            tick: The pending tick finished (ms); None clears none.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def schedule_relet(self, key: str, tick: int, expected: int, lease: int) -> bool:
        """Take over the pending tick `tick`: move its lease from `expected` (the expired lease
        the caller read) to `lease` iff the tick is still pending with that lease (atomic
        compare-and-set: of concurrent takeovers, exactly one wins). True if this call won.

        Args:
            key: The schedule's key.
            tick: The pending tick (ms).
            expected: Its lease as the caller read it (ms).
            lease: The new lease (ms).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def schedule_pause(self, key: str, paused: bool, now: int) -> bool:
        """Pause or resume the schedule (created with cursor `now` if missing). Resuming moves
        the cursor to `now` when it is behind: ticks of the paused time never fire. Atomic;
        True if the flag changed.

        Args:
            key: The schedule's key.
            paused: Pause (True) or resume (False).
            now: The current time (ms).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
