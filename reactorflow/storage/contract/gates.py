"""The storage contract for gates (part of `Storage`; see `storage/contract/storage.py`)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

from reactorflow.storage.contract.values import GateTake, OrderedLine, RunCreation, Subscription


class GatesContract(abc.ABC):
    """Locks, semaphores, rate limits, periods and ordered locks, keyed by gate key."""

    # -- gates ---------------------------------------------------------------------------------
    # A gate key is any text a user's template produced. Each gate's keys are independent of
    # runs and share one slot per key on Redis. Every entry has a TTL of its own (a holder's
    # lease, a waiter's patience, a window, a period) but an ordered lock's line: a run queued
    # behind the lock waits however long, so the line is kept while a ticket is in it (and
    # deleted once every place is finished).

    @abc.abstractmethod
    async def gate_acquire(self, key: str, holder: str, *, limit: int, ttl: float,
                           queue_for: float = 0.0, creates: RunCreation | None = None,
                           ) -> GateTake:
        """Take one of the `limit` places of gate `key` for `holder`, for `ttl` seconds unless
        extended. Atomic: holders whose TTL ran out are dropped first; then a `holder` already
        in is HELD (its TTL reset; also when a release handed it the place), or CREATED when
        the release that handed it the place also created its run (see `creates`; said once:
        a later call says HELD); else ACQUIRED when fewer than `limit` hold it (it leaves the
        queue, and the run it queued with is forgotten: its caller creates it); else BUSY with
        nothing changed but, when `queue_for` > 0, `holder` queued for `queue_for` seconds
        from now (first queued, first served; one queued already keeps its place): a release
        hands a freed place to the first queued holder still within its time (see
        `gate_release`).

        `creates` (with `queue_for` > 0; a caller waiting for the last gate its new run needs):
        the run to create when a release hands `holder` the place, stored beside its queue
        entry. The release then creates it, atomically with the hand-over and exactly as
        `create_run` would (if `create_run` would refuse, the place is handed over all the
        same, without the run). A backend that cannot do that atomically ignores `creates`
        (`RedisStorage` on a Redis Cluster, where the run's keys and the gate's are in
        different slots): the holder is then only ever handed the place, and its caller
        creates the run. Leaving the queue any other way (`gate_withdraw`, a direct ACQUIRED,
        the queue time running out) forgets the run: nothing of it is ever stored.

        Args:
            key: The gate's key.
            holder: Who takes the place (a run id, or a step's holder id).
            limit: The most holders at once.
            ttl: Seconds the place lives unless extended.
            queue_for: Seconds to stay queued when busy (0: not queued).
            creates: The run to create when a release hands `holder` the place (queued
                only).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def gate_withdraw(self, key: str, holder: str) -> GateTake:
        """`holder` stops waiting for gate `key` (atomic): it leaves the queue and the run it
        queued with is forgotten (never created now). HELD when a release handed it the place
        meanwhile: it holds the gate, and its caller either keeps the place or releases it;
        CREATED when that release also created its run (its caller drives the run or ends
        it); BUSY when it does not hold the gate.

        Args:
            key: The gate's key.
            holder: Who stops waiting.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def gate_release(self, key: str, holder: str) -> bool:
        """Drop `holder` from gate `key` (atomic); True if it was there. Then each freed place
        goes to the first queued holder still within its time and under its limit (it becomes
        a holder for the `ttl` it asked with; the run it queued with, if any, is created: see
        `gate_acquire`) and the gate's channel is notified with each such holder's name
        (followed by `b"\\0+"` when its run was created), or with `b"1"` when no place was
        handed over (see `subscribe_gate`). Releasing twice is harmless.

        Args:
            key: The gate's key.
            holder: Who leaves.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def gate_extend(self, key: str, holder: str, ttl: float) -> bool:
        """Reset `holder`'s TTL on gate `key`; False when it no longer holds it.

        Args:
            key: The gate's key.
            holder: Who holds it.
            ttl: The new time to live, in seconds.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def gate_holders(self, key: str) -> list[str]:
        """The live holders of gate `key` (any order).

        Args:
            key: The gate's key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    def subscribe_gate(self, key: str) -> AbstractAsyncContextManager[Subscription]:
        """Subscribe to gate `key`'s channel: notified when a place frees (a release, an
        ordered turn passed on). Subscribe first, then try, then wait. The message
        (`Subscription.message`) is the name of the queued holder a release handed the place
        to (followed by `b"\\0+"` when the release created its run), else `b"1"`.

        Args:
            key: The gate's key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def rate_charge(self, key: str, windows: Sequence[tuple[int, int]], charge: str,
                          ) -> float | None:
        """Charge one call to every fixed window `(seconds, limit)` of rate limit `key`, all or
        nothing, in one atomic step (the bucket of each window is `floor(now / seconds)`, now
        being the storage's clock). `charge` names the charge: a call with a charge already
        admitted is admitted again without counting (a run is charged once, whatever its
        resumes or redeliveries; the memory of a charge lasts twice the longest window, at least
        a day, after it was last asked for: each call with it renews it, so a run that keeps
        trying its gates is never charged twice). Returns None when admitted, else the seconds
        until the first refusing window frees (nothing charged).

        Args:
            key: The rate limit's key.
            windows: `(seconds, limit)` for each window.
            charge: The charge's name (admitted once).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def period_marked(self, key: str) -> bool:
        """Whether period marker `key` (a gate key with its bucket) exists.

        Args:
            key: The marker's key (a gate key with its bucket).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def mark_period(self, key: str, ttl: float) -> bool:
        """Set period marker `key` for `ttl` seconds if absent (atomic); True if this call set
        it.

        Args:
            key: The marker's key (a gate key with its bucket).
            ttl: Seconds the marker lives.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_enter(self, key: str, ticket: str) -> int:
        """Take a place in ordered lock `key`'s line for `ticket` (a run id): the next number,
        stamped with the storage's clock. Atomic and idempotent: a ticket already in line keeps
        its number, unless it was passed over (see `ordered_turn`): then it takes the next.
        Returns the number (1 for the first in an empty line). The line never
        expires while a ticket is in it, however long nothing asks (`ordered_leave` deletes it
        once every place is finished; `ordered_reset` at once).

        Args:
            key: The ordered lock's key.
            ticket: The run id taking a place.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_turn(self, key: str, ticket: str, poison_pill_timeout: float) -> bool | None:
        """Whether it is `ticket`'s turn in ordered lock `key` (atomic). Finished places are
        passed first; then, while the first unfinished place before `ticket` was stamped more
        than `poison_pill_timeout` seconds ago, it is passed over (a poison pill: its holder
        stopped making progress). True when `ticket` is first, False when an earlier place
        remains (either way asking renews `ticket`'s stamp: its holder is alive); None when
        `ticket` is not in line. A ticket that was passed over lost its turn: when it asks
        again it takes a new place at the end of the line first (the next number, as if it
        entered anew), so it never has the turn while the ticket whose turn came holds it.

        Args:
            key: The ordered lock's key.
            ticket: The run id asking.
            poison_pill_timeout: Seconds without a stamp after which an earlier place is passed
                over.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_stamp(self, key: str, ticket: str) -> bool:
        """Renew `ticket`'s stamp (its holder is alive and making progress); False when it is
        not in line, or was passed over (it lost its turn; its next `ordered_turn` takes a new
        place at the end): nothing is renewed then.

        Args:
            key: The ordered lock's key.
            ticket: The run id whose stamp is renewed.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_leave(self, key: str, ticket: str) -> bool:
        """Leave the line of ordered lock `key` (atomic): `ticket`'s place is finished and the
        turn passes on (the channel is notified); when every place is finished the line is
        deleted and numbering starts again. True if `ticket` was in line.

        Args:
            key: The ordered lock's key.
            ticket: The run id leaving.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_peek(self, key: str, ticket: str | None = None) -> OrderedLine:
        """Ordered lock `key`'s line as it stands (read only, one atomic read): whose turn it
        is (the first unfinished place), its last stamp, and how many tickets wait behind it;
        with `ticket`, also how many unfinished places are before that ticket's (`ahead`;
        None when it is not in line, or was passed over).

        Args:
            key: The ordered lock's key.
            ticket: A ticket whose place to tell (None: none).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    async def ordered_skip(self, key: str, ticket: str) -> bool:
        """Take `ticket` out of ordered lock `key`'s line as if it had left (`ordered_leave`:
        its place is finished, the turn passes on, the channel is notified): an operator
        passing over a stuck ticket without waiting for its poison-pill timeout. True if it was
        in line. Its run, if it asks again, takes a new place at the end.

        Args:
            key: The ordered lock's key.
            ticket: The ticket to take out (`ordered_peek().turn`, say).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
        return await self.ordered_leave(key, ticket)

    @abc.abstractmethod
    async def ordered_pass(self, key: str, ticket: str, quiet_for: float) -> bool:
        """Pass over `ticket`'s place in ordered lock `key`'s line (atomic) if it has the turn
        and was last stamped more than `quiet_for` seconds ago (the storage's clock): the
        poison pill for one named ticket, as `ordered_turn` passes a place over. A waiter uses
        it once it has found the turn's run ended: that run's `ordered_leave` was lost (a
        failover dropped an acknowledged write), and the line would otherwise wait out the
        lock's `poison_pill_timeout`. A ticket that asked for its turn since its run was read
        (the run went on: a rewind) is freshly stamped and keeps its place. The channel is
        notified when a place was passed over.

        Args:
            key: The ordered lock's key.
            ticket: The ticket whose turn it is (`ordered_peek().turn`).
            quiet_for: Seconds without a stamp after which it is passed over.

        Returns:
            True if it was passed over; False when it is not the turn, or stamped since.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def ordered_reset(self, key: str) -> int:
        """Delete ordered lock `key`'s line (atomic): numbering starts again and the channel is
        notified. Returns how many tickets were in line; each of their runs takes a new place,
        in the order they next ask for their turn.

        Args:
            key: The ordered lock's key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
