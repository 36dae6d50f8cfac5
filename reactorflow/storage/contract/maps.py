"""The storage contract for map element slots (part of `Storage`; see
`storage/contract/storage.py`)."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Protocol

from reactorflow.errors import StorageError
from reactorflow.storage.contract.values import Claim, ElementStart, SlotWrite

MAX_ELEMENTS = 2**31
"""Element indexes are whole numbers from 0 to `MAX_ELEMENTS - 1` (a map has at most this many
elements): every range `lock_and_load_elements` reads lies within them."""
LOAD_LIMIT = 1024
"""The most element slots one `lock_and_load_elements` call reads."""


class Slots(Protocol):
    """Where an execution's map element slots live: its storage (a run), or the memory of an
    element whose reactor nests a map (`runtime.maps.memory_slots.HeldSlots`)."""

    async def save_elements(self, run_id: str, key: str, outcomes: Mapping[int, bytes], *,
                            replace: bool = False, owner: str | None = None) -> object: ...

    async def load_elements(self, run_id: str, key: str, start: int,
                            count: int) -> list[bytes | None]: ...


def check_ranges(ranges: Sequence[tuple[str, int, int]]) -> None:
    """Refuse ranges `lock_and_load_elements` must not read (the Redis script checks the same,
    before it writes anything).

    Raises:
        StorageError: a start or count that is no whole number, a range outside
            `0 .. MAX_ELEMENTS`, or more than `LOAD_LIMIT` slots in all.
    """
    total = 0
    for key, start, count in ranges:
        if (isinstance(start, bool) or not isinstance(start, int) or isinstance(count, bool)
                or not isinstance(count, int) or start < 0 or count < 0
                or start + max(count, 1) > MAX_ELEMENTS):
            raise StorageError(f"element range of map {key!r} (first {start!r}, count {count!r})"
                               f" is not whole numbers within 0 .. {MAX_ELEMENTS}")
        total += max(count, 1)
    if total > LOAD_LIMIT:
        raise StorageError(f"{total} element slots asked for in one call (at most {LOAD_LIMIT})")


def claimable(claim: Claim, counter: int, stored: int) -> int:
    """How many indexes `settle_element` claims within `claim`'s window, with the dispatch
    counter at `counter` and `stored` outcomes held (the rule its docstring states; the Redis
    script computes the same)."""
    out = max(0, counter - stored)
    left = claim.total - counter
    take = min(claim.window - out, left)
    if take <= 0:
        return 0
    return take if take >= min(claim.want, left) or out == 0 else 0


class MapSlotsContract(abc.ABC):
    """Element slots of map steps: one slot per element index, beside the run."""

    # -- map element slots ---------------------------------------------------------------------
    # A map step's element outcomes live beside the run, one slot per element index, never in
    # the run's step records: storing or reading an element costs the same whatever the map's
    # size, and elements run by workers write only their own slots (never the run).

    @abc.abstractmethod
    async def save_elements(self, run_id: str, key: str, outcomes: Mapping[int, bytes], *,
                            replace: bool = False, owner: str | None = None
                            ) -> SlotWrite | None:
        """Store element outcomes of map `key` (element index -> record), all in one atomic
        call (one round trip however many are given; cost proportional to their number only).

        First wins per element: an index that already holds an outcome keeps it (a duplicate
        delivery, a re-run after a crash), unless `replace` (a rollback rewriting a completed
        element as undone). Safe to retry.

        Fencing: a write by the run's owning execution (an inline map's outcomes, a fanned-out
        map's items, job data and undo throws, a rollback's undos) names its lock `owner`, and
        is refused with `LockLost` (nothing written, in the same atomic call) unless `owner`
        holds the run's liveness lock, as `save_step` is. So an execution whose lock expired or
        was taken over writes no element. Only element and undo jobs, which never hold the
        run's lock, write unfenced (`owner=None`; their writes are first-wins per element, or
        rewrite an outcome only their own element lock guards).

        Returns how many outcomes were written and how many the map now holds, or None (nothing
        written) when the run does not exist. Slots take the run's expiry (the retention rule,
        storage/contract/storage.py): none while it has not ended, its retention once it has, and
        the write that ends the run (or makes it live again) sets their expiry atomically with its
        own (memory: they live on the run; Redis: the run records the slot keys written), so no
        crash leaves a slot outliving its run.

        Args:
            run_id: The run's id.
            key: The map step's key.
            outcomes: Element index -> encoded outcome.
            replace: Overwrite outcomes already stored (a rollback).
            owner: The run's lock owner making the write (fenced), or None (an element or
                undo job: unfenced).

        Raises:
            LockLost: `owner` was given and does not hold the run's lock (nothing written).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def settle_element(self, run_id: str, key: str, index: int, outcome: bytes, *,
                             control: str, stop: int | None = None,
                             advance: int | None = None,
                             claim: Claim | None = None) -> SlotWrite | None:
        """Store one element's outcome of map `key`, first wins (as `save_elements`); when
        this call stored it, also (in the same atomic call, one round trip) set field `stop`
        of map `control`'s slots to the index, first wins (an atomic map's stop marker), and
        claim indexes of the counter in field `advance` of `control` (its value before this
        call, the counter then advanced by the number claimed: concurrent callers claim
        disjoint consecutive ranges).

        How many: one without `claim`. With `claim` (a chunk's window), with `next` the
        counter, `out` = `next` minus the outcomes the map holds (after this one: elements
        dispatched and not settled), `room` = `claim.window - out` and `left` = `claim.total -
        next`: `min(room, left)` indexes when that is at least `min(claim.want, left)` or `out`
        is 0, else none (a claim waits until a chunk fits; the caller whose outcome leaves
        nothing out always claims, so the chain never stalls). So at most `claim.window`
        elements are ever dispatched without an outcome.

        Unfenced: only element jobs settle elements, and they never hold the run's lock (see
        `save_elements`).

        Closed maps: when the run's stored status is one of `CLOSES_MAPS` (it ended, or its
        rollback began), the outcome is still stored (an element that ran must be known to the
        rollback) but no counter value is claimed (`following` None: the chain of elements
        stops) and the reply says `closed`, read in the same atomic call.

        Args:
            run_id: The run's id.
            key: The map step's key.
            index: The element's index.
            outcome: Its encoded outcome.
            control: The map key of the slots holding the stop marker and the counter.
            stop: The field to mark with `index` (None: none).
            advance: The counter field to advance (None: none); it holds an integer (encoded
                as decimal text), or nothing (counted from 0).
            claim: Claim within a window, as above (None: one index).

        Returns:
            As `save_elements`, with `following` the first claimed counter value and `claimed`
            how many (`following` None and `claimed` 0 unless this call stored the outcome,
            `advance` was given, the map is not closed and something was claimed) and
            `closed`; None when the run does not exist.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def load_elements(self, run_id: str, key: str, start: int,
                            count: int) -> list[bytes | None]:
        """The outcomes of elements `start` .. `start + count - 1` of map `key`, in index order
        (None for an element without one), in one round trip.

        Args:
            run_id: The run's id.
            key: The map step's key.
            start: The first element's index.
            count: How many elements.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    async def load_element_ranges(self, run_id: str,
                                  ranges: Sequence[tuple[str, int, int]]
                                  ) -> list[list[bytes | None]]:
        """Several `load_elements` reads of one run — (key, start, count) each — in one round
        trip where the backend can (the base class reads them one by one).

        Args:
            run_id: The run's id.
            ranges: `(map key, start, count)` for each read.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
        return [await self.load_elements(run_id, key, start, count)
                for key, start, count in ranges]

    async def lock_and_load_elements(self, lock_id: str, owner: str, ttl: float, run_id: str,
                                     ranges: Sequence[tuple[str, int, int]]
                                     ) -> list[list[bytes | None]] | None:
        """Take lock `lock_id` for `owner` (as `acquire_lock`), then read element slots of run
        `run_id` (as `load_element_ranges`), in one round trip where the backend can (the base
        class takes the lock, then reads). The reads always see what was stored before the lock
        was taken.

        Args:
            lock_id: The lock's name (as for `acquire_lock`).
            owner: Who takes it.
            ttl: Seconds until it expires unless extended.
            run_id: The run whose element slots are read.
            ranges: `(map key, start, count)` for each read.

        Returns:
            The reads, or None when another owner holds the lock (then nothing is read).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached),
                or a range is out of bounds (`check_ranges`: refused before the lock is taken).
        """
        check_ranges(ranges)
        if not await self.acquire_lock(lock_id, owner, ttl):  # type: ignore[attr-defined]
            return None
        return await self.load_element_ranges(run_id, ranges)

    @abc.abstractmethod
    async def start_element(self, lock_id: str, owner: str, ttl: float, run_id: str,
                            ranges: Sequence[tuple[str, int, int]], *, starts: tuple[str, int],
                            stop: tuple[str, int]) -> ElementStart | None:
        """Start one element of a fanned-out map in a job: take lock `lock_id` for `owner` (as
        `acquire_lock`; another owner holds it: None, nothing read or marked), then, in one
        call atomic with every write of run `run_id`, either mark the element started or refuse
        it, then read `ranges` (as `load_element_ranges`, after the mark).

        The fence: the element (slot `starts[1]` of map `starts[0]`) is **refused** — not
        marked, `refused` True — when it is not marked started yet and its map is closed: the
        run's stored status is one of `CLOSES_MAPS` (the run ended, or its rollback began: the
        save of that status closes every map of the run at once), or field `stop[1]` of map
        `stop[0]` holds a value (an atomic map stopped by a failed element), or the run does not
        exist. Else it is marked (first wins) and may run. An element marked by an earlier call
        (its job was cut off mid-body) is never refused: its side effect may have happened, so
        it runs again to a known outcome. Since the mark and the status save are atomic with
        each other, every element whose body may run after a rollback began was marked before:
        the rollback finds it among the marked elements without an outcome and waits for it.

        Cost: the lock, one mark, one field per slot read (one round trip on a single node;
        on a Redis Cluster the lock is in a slot of its own: two).

        Args:
            lock_id: The element's lock (as for `acquire_lock`).
            owner: Who takes it.
            ttl: Seconds until it expires unless extended.
            run_id: The run whose map it is.
            ranges: `(map key, start, count)` for each read.
            starts: `(map key, index)` of the element's started mark.
            stop: `(map key, field)` of the map's stop marker.

        Returns:
            The reads and whether the element was refused, or None when another owner holds
            the lock.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached),
                or a range is out of bounds (`check_ranges`: refused before the lock is taken).
        """

    @abc.abstractmethod
    async def refresh_elements(self, run_id: str, keys: Sequence[str]) -> None:
        """Give the element slots of maps `keys` of the run the run's expiry (the retention rule,
        storage/contract/storage.py): none while it has not ended, the rest of its retention once
        it has, in one round trip; nothing when the run does not exist. The run's status writes
        already do this for every slot written through this contract (see `save_elements`); the
        engine calls it after the write that ends the run (and after its last write of an
        execution) for slots an earlier version wrote without recording them. (Memory keeps
        slots on the run: nothing to do.)

        Args:
            run_id: The run's id.
            keys: The map keys whose slots are refreshed (those without slots are skipped).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def clear_elements(self, run_id: str, owner: str, keys: Sequence[str]) -> None:
        """Fenced removal of the element slot maps `keys` of the run (a rewind runs their map
        again from nothing); atomic, idempotent. Refused with `LockLost` (nothing removed)
        unless `owner` holds the run's lock.

        Args:
            run_id: The run's id.
            owner: The lock owner making the write.
            keys: The slot maps to remove (`map_slot_keys.slot_keys` of each map step).

        Raises:
            LockLost: `owner` does not hold the run's lock (nothing was removed).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def count_elements(self, run_id: str, key: str) -> int:
        """How many elements of map `key` hold an outcome.

        Args:
            run_id: The run's id.
            key: The map step's key.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
