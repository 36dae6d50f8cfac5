"""The storage contract for schedules (part of `Storage`; see `storage/base.py`)."""

from __future__ import annotations

import abc

from reactorflow.storage.values import ScheduleState


class SchedulesContract(abc.ABC):
    """One record per schedule: its cursor, paused flag, last run and last error."""

    # -- schedules -----------------------------------------------------------------------------
    # A schedule's key is "<reactor>:<schedule name or index>". Its record holds a cursor (the
    # last tick handled, in ms), a paused flag, the last run and the last error. Every
    # operation is atomic and touches that one record: constant work per tick, whatever the
    # number of runs stored.

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
    async def schedule_advance(self, key: str, expected: int, cursor: int) -> bool:
        """Claim the ticks up to `cursor`: move the cursor from `expected` to `cursor` iff it is
        still `expected` and the schedule is not paused (atomic compare-and-set: of concurrent
        claims of one tick, exactly one wins). True if this call moved it.

        Args:
            key: The schedule's key.
            expected: The cursor the caller read.
            cursor: The tick claimed (ms).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def schedule_record(self, key: str, *, last_run: str = "", error: str = "") -> None:
        """Record what the last claimed tick did: the run it started (`last_run`, clearing the
        error) or its problem (`error`). Atomic; a missing schedule is left missing.

        Args:
            key: The schedule's key.
            last_run: The run started.
            error: Why no run started.

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
