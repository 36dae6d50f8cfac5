"""The storage contract for notification: a run's channels, published after the durable write
they announce (part of `Storage`; see `storage/contract/storage.py`)."""

from __future__ import annotations

import abc
from contextlib import AbstractAsyncContextManager

from reactorflow.storage.contract.values import Subscription


class NotificationContract(abc.ABC):
    """Subscribe first, then read, then wait; pub/sub is an optimisation."""

    # -- notification --------------------------------------------------------------------------

    @abc.abstractmethod
    def subscribe(self, run_id: str, topic: str = "") -> AbstractAsyncContextManager[Subscription]:
        """Subscribe to a run's channel: its completion (topic "") or one unit's result (topic =
        the unit's step key). Subscribe first, then read the record, then wait.

        Args:
            run_id: The run's id.
            topic: `""` for the run's completion, or an async unit's step key for its result.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def publish(self, run_id: str, topic: str = "", message: bytes = b"1") -> None:
        """Notify a run's channel (after the durable write it announces).

        Args:
            run_id: The run's id.
            topic: As for `subscribe`.
            message: The message (the subscriber reads the record itself).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
