"""The storage contract for runs: their creation, reads, fenced checkpoints and status writes,
and an async unit's record (part of `Storage`; see `storage/contract/storage.py`)."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from reactorflow.storage.contract.values import RunHead, StoredRun


class RunsContract(abc.ABC):
    """A run in parts: a head, one record per step, a bounded history, async units' records."""

    # -- runs ----------------------------------------------------------------------------------

    @abc.abstractmethod
    async def create_run(
        self,
        run_id: str,
        *,
        reactor: str,
        status: str,
        meta: bytes,
        state: bytes,
        created_at: float,
        owner: str,
        lock_ttl: float,
        events: Sequence[bytes] = (),
        idempotency_key: str | None = None,
    ) -> bool:
        """Atomically create the run and take its liveness lock for `owner` (count 1).

        Returns False and writes nothing when the run id already exists, or when another owner
        holds the run's lock (a start takes its run's lock before it claims an idempotency key:
        whoever takes over a claim whose claimer died takes that lock first, so a claimer that
        comes back late can no longer create its run). A retry of a call that did create the run
        still returns True; a lock `owner` already holds is taken over (count 1). Adds the run
        to the reactor's index and its status index; a call that raises after storing the run
        leaves it findable all the same (see "Findable runs" above).

        Args:
            run_id: The run's id.
            reactor: The reactor's name.
            status: The run's first status.
            meta: The encoded run metadata, written once.
            state: The encoded run state.
            created_at: Creation time, seconds since the epoch (orders the indexes).
            owner: The lock owner that creates the run and holds its lock.
            lock_ttl: The lock's time to live, in seconds.
            events: Encoded history events to store with it.
            idempotency_key: The idempotency key of `reactor` this run's start claimed
                (`claim_idempotency`): from now on the claim lives as long as the run (see
                `claim_idempotency`).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def load_run(self, run_id: str, *, history: bool = False,
                       claims: bool = False) -> StoredRun | None:
        """The run's head and every step record, with its history and claims when asked for,
        read atomically (one snapshot, one round trip).

        Args:
            run_id: The run's id.
            history: Read the run's history too.
            claims: Read the run's interrupt claims too.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    async def load_runs(self, run_ids: Sequence[str], *, history: bool = False,
                        claims: bool = False) -> list[StoredRun | None]:
        """`load_run` of each id, in order (None where there is no such run), in as few round
        trips as the backend can: a read of many runs (`reactorflow deploy-check` reads every
        run in flight). Each run is read atomically, as `load_run` reads it; the runs are not
        read as one snapshot. Writes nothing. The base class reads them one by one; a backend
        overrides it (Redis: pipelined, a batch of runs per round trip).

        Args:
            run_ids: The runs' ids.
            history: Read each run's history too.
            claims: Read each run's interrupt claims too.

        Raises:
            CorruptRecord: a run's keys hold a value of the wrong type (that run is named).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
        return [await self.load_run(run_id, history=history, claims=claims)
                for run_id in run_ids]

    @abc.abstractmethod
    async def load_head(self, run_id: str) -> RunHead | None:
        """The run's head without its steps.

        Args:
            run_id: The run's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def save_step(
        self, run_id: str, owner: str, key: str, record: bytes, events: Sequence[bytes] = (),
        *, unit: bool = False,
    ) -> bytes | None:
        """Fenced checkpoint of one step: write its record, append events, touch the run.

        Atomic; refused with `LockLost` (nothing written) unless `owner` holds the lock. Costs
        the same whatever the number of steps already stored. Returns the pending control
        request (see `request_control`), if any. `unit=True` marks the dispatch of an async
        unit: (run, key) also enters the unit index read by `scan_units` (an index entry is a
        hint, removed by `save_unit`); findable as the module says, even when the index write
        is cut off (a repair record that `scan_records` finds).

        Args:
            run_id: The run's id.
            owner: The lock owner making the write (fenced: it must hold the run's lock).
            key: The step's key (dotted inside a composed child).
            record: The encoded step record.
            events: Encoded history events to append.
            unit: This write dispatches an async unit: also enter it in the unit index.

        Raises:
            LockLost: `owner` does not hold the run's lock (nothing was written).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def load_step(self, run_id: str, key: str) -> bytes | None:
        """One step record of a run (None when the run or the record does not exist).

        Args:
            run_id: The run's id.
            key: The step's key (dotted inside a composed child).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def save_state(
        self,
        run_id: str,
        owner: str,
        *,
        status: str,
        previous_status: str,
        state: bytes,
        steps: Mapping[str, bytes] | None = None,
        events: Sequence[bytes] = (),
        clear_control: bool = False,
        publish: bool = False,
        release: bool = False,
        gates: Sequence[tuple[str, str]] = (),
        unless_control: bool = False,
    ) -> bytes | None:
        """Fenced write of the run's status and state, with any step records that change with
        it; atomic like `save_step`. With `release`, the same atomic write then leaves the run's
        lock once (as `release_lock`): the owner's final save and its release in one. Moves the
        run between status indexes (index entries are hints that readers verify against the
        record). With `clear_control` the pending control request is removed; with `publish`,
        the run's completion channel is notified after the write. `gates` lists (gate key,
        holder) pairs to drop, each as `gate_release` does, in the same round trip: where the
        backend can, after the write and atomically with it (in process; on one Redis node the
        save and the releases are one script), so a refused write drops none; where it cannot
        (a Redis Cluster keeps a run and a gate in different slots), before the write, so that
        whoever sees the new state finds them free (a refused write may then still have
        dropped them). Returns the pending control request (None when cleared). With
        `unless_control`, a pending control request refuses the write:
        nothing is written (nor released, published or moved between indexes, but for index
        hints a Redis Cluster may have added), and the request is returned; so there, a returned
        request means nothing was written. With `unless_control` the `gates` are dropped only
        once the write landed, after it, by every backend, so a refused write drops none.

        Args:
            run_id: The run's id.
            owner: The lock owner making the write (fenced: it must hold the run's lock).
            status: The new status.
            previous_status: The status the writer read (moves the run between status indexes).
            state: The encoded run state.
            steps: Step records (key -> record) written with it.
            events: Encoded history events to append.
            clear_control: Remove the pending control request.
            publish: Notify the run's completion channel after the write.
            release: Leave the run's lock once in the same atomic write.
            gates: (gate key, holder) pairs to drop with the write (see above).
            unless_control: Write nothing when a control request is pending (see above).

        Raises:
            LockLost: `owner` does not hold the run's lock (nothing was written).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def migrate_run(
        self, run_id: str, owner: str, *, expected_meta: bytes, meta: bytes, state: bytes,
        steps: Mapping[str, bytes], removed: Sequence[str], events: Sequence[bytes] = (),
    ) -> bool:
        """Fenced rewrite of a run onto another version of its reactor (a migration): its meta
        (the one write of a meta after `create_run`), its state, the step records written and
        the step records removed, and the events that record it, in one atomic write. The
        status, the claims, the control request and the indexes do not change. Refused with
        `LockLost` (nothing written) unless `owner` holds the run's lock; returns False, with
        nothing written, when the stored meta is no longer `expected_meta` (another migration
        landed first: read the run again). A retry of an applied write returns True.

        Args:
            run_id: The run's id.
            owner: The lock owner making the write (fenced: it must hold the run's lock).
            expected_meta: The encoded meta the migration was computed from.
            meta: The new encoded meta.
            state: The new encoded state.
            steps: Step records (key -> record) written.
            removed: Step keys whose records are removed (written ones are not removed).
            events: Encoded history events to append.

        Raises:
            LockLost: `owner` does not hold the run's lock (nothing was written).
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def history(self, run_id: str) -> list[bytes]:
        """The run's events, oldest first (at most `history_limit`, the newest kept).

        Args:
            run_id: The run's id.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """


    # -- async units ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def save_unit(self, run_id: str, key: str, record: bytes,
                        events: Sequence[bytes] = (), *, settled: bool = True) -> bool:
        """Write the record of an async unit (an `async_step` run by a worker), drop it from the
        unit index, then publish the record on the run's `key` topic. Unfenced: a unit never
        holds the run's lock, and the run's owner never writes a unit's record after
        dispatching it (but for an async_reactor step whose child run has ended: the owner
        may checkpoint the child's outcome first, and the child's report then writes nothing
        unless it read the step unfinished just before: the same outcome, written twice).
        With `settled=False` (a unit parked between two attempts) the unit stays
        in the unit index (the sweeper still finds it if its next attempt's job is lost) and
        nothing is published.
        Returns False (nothing written) when the run no longer exists.

        Args:
            run_id: The run's id.
            key: The async unit's step key.
            record: The unit's encoded record.
            events: Encoded history events to append.
            settled: False for a record that does not settle the unit.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
