"""Idempotency keys: one run per (reactor, key), even when the start that claimed a key died
before storing its run.

The protocol of a start with a key, in order:

1. Take the liveness lock of the new run's id (a fresh id: nobody else holds it).
2. Claim the key for that id (first wins). Won: create the run; `create_run` is refused when
   another owner holds the run's lock, which only happens after step 4 took the claim over.
3. Lost to run W: if W is stored, the start is a replay of W. If W's lock is held, its
   claimer is about to store it: wait. Nothing extends that lock before the run is stored, so
   the wait ends within `lock_ttl`: W is stored, or its lock lapses (step 4).
4. W is not stored and nobody holds its lock: its claimer died between its claim and its store.
   Take W's lock for `retention` seconds (a tombstone: a claimer that comes back late can no
   longer create W), check once more that W was not stored, release the claim if it still
   names W, and claim again from step 2 (first wins among the starts that found it dead).
   W's lock held by that tombstone: a take-over was cut off after taking it (a storage
   outage, a crash) and before releasing the claim; W can never be stored, so release the
   claim and claim again too (else the key stayed wedged for `retention`).
5. A replay (step 3) repairs W first (`repair`): a start cut off after storing W but before
   W's index entries landed (on a Redis Cluster they live on other masters) left W where the
   sweeper's index scans never look; the replay writes them again, and when W is running or
   rolling back with nobody holding its lock (its start died before enqueueing or driving
   it), hands W to the workers.
"""

from __future__ import annotations

import logging

from reactorflow import clock, config, records
from reactorflow.errors import LockTimeout
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.status import Status
from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.run")
POLL_FIRST = 0.005
"""Seconds between the first checks of a claim whose claimer is storing its run (doubling)..."""
POLL_MAX = 0.1
"""...up to this many seconds."""


async def claim(storage: Storage, reactor: str, key: str, run_id: str, owner: str) -> str | None:
    """Claim `key` for the start of `run_id` (see the module docstring).

    Args:
        storage: where the key and the runs live.
        reactor: the reactor's name (keys are per reactor).
        key: the caller's idempotency key.
        run_id: the id of the run this start would create.
        owner: the lock owner this start creates its run with.

    Returns:
        None when this start holds the key (it goes on and creates `run_id`), else the id of
        the stored run that holds it (this start is a replay of it).

    Raises:
        LockTimeout: the key's claim kept naming an unstored run whose lock stayed held for
            longer than `lock_ttl + lock_wait` seconds (a lock taken by someone else).
    """
    settings = config.settings()
    await storage.acquire_lock(run_id, owner, settings.lock_ttl)  # refused only if taken over
    patience = settings.lock_ttl + settings.lock_wait
    deadline = clock.Patience(patience)  # a poll for another start: real time on a fake clock
    delay = POLL_FIRST
    while True:
        winner = await storage.claim_idempotency(reactor, key, run_id)
        if winner == run_id:
            return None
        if await storage.load_head(winner) is not None:
            await storage.release_lock(run_id, owner)
            return winner
        holder = await storage.lock_owner(winner)
        if holder is None and await _take_over(storage, reactor, key, winner):
            continue
        if holder == _tombstone(winner):  # a take-over cut off before it released the claim
            await _release_dead_claim(storage, reactor, key, winner)
            continue
        if deadline.exhausted():
            await storage.release_lock(run_id, owner)
            raise LockTimeout(winner, patience, "replay the idempotent start of")
        await clock.poll(delay)
        delay = min(delay * 2, POLL_MAX)


def _tombstone(winner: str) -> str:
    """The lock owner a take-over holds `winner`'s lock as (for `retention`: `winner` can
    never be stored once a take-over found it unstored)."""
    return f"taken-over-{winner}"


async def _take_over(storage: Storage, reactor: str, key: str, winner: str) -> bool:
    """Release the claim of a start that died before storing `winner`; False when `winner`
    turned out to be alive or stored (nothing changed, the caller checks again)."""
    tombstone = _tombstone(winner)
    if not await storage.acquire_lock(winner, tombstone, storage.retention):
        return False
    if await storage.load_head(winner) is not None:  # stored just before its lock lapsed
        await storage.release_lock(winner, tombstone)
        return False
    await _release_dead_claim(storage, reactor, key, winner)
    return True


async def _release_dead_claim(storage: Storage, reactor: str, key: str, winner: str) -> None:
    """Release `key`'s claim if it still names `winner`, whose lock a tombstone holds (it was
    found unstored under that lock: it never will be)."""
    if await storage.release_idempotency(reactor, key, winner):
        log.warning("reactorflow.idempotency.taken_over reactor=%s run_id=%s: the start that "
                    "claimed the key died before storing its run", reactor, winner)


async def repair(storage: Storage, reactor: str, run_id: str) -> None:
    """Step 5 of the protocol (see the module docstring): the replay of `run_id` writes its
    index entries again, and enqueues it when they were lost and it is running or rolling
    back with nobody holding its lock.

    Args:
        storage: where the run lives.
        reactor: the run's reactor.
        run_id: the stored run the idempotency key names.

    Raises:
        StorageError: the storage failed (nothing enqueued; a later replay or the sweeper's
            record pass repairs it).
    """
    if not await storage.repair_index(run_id):
        return
    head = await storage.load_head(run_id)
    if head is None or head.status not in (Status.RUNNING, Status.ROLLING_BACK):
        log.warning("reactorflow.idempotency.reindexed reactor=%s run_id=%s", reactor, run_id)
        return
    if await storage.lock_owner(run_id) is not None:  # its lock lapses: the sweeper's then
        log.warning("reactorflow.idempotency.reindexed reactor=%s run_id=%s", reactor, run_id)
        return
    queue.enqueue_run(run_id, reactor, version=records.meta_version(head.meta))
    log.warning("reactorflow.idempotency.reindexed reactor=%s run_id=%s enqueued=1: the start "
                "that stored it was cut off before its index entries and its hand-over",
                reactor, run_id)
