"""Rolling a fanned-out map back with undo jobs, in throws of `batch_size` (the owner's side; the
worker's side is `undo_job`).

The owner (the execution rolling the run back), each time it meets the map in its rollback:

1. reads the current throw (`UndoThrow`, in the map's job data): if some of its elements still
   hold an undone-able outcome (completed, no undo outcome saved), the throw is out: once it
   has been out for `stall_timeout`, the highest of them that nobody holds the undo lock of is
   enqueued again (its job was lost with a dead worker; the chain of step 4 re-enqueues the
   rest), and the owner waits — parked (the run is saved `rolling_back` with the map in
   `parked_on`, nothing held, and resumed by the throw's last undo or the periodic re-check:
   a worker, and a caller's `run`/`continue_`, which returns the run parked as it does at a
   fanned-out map going forward), or in this process (subscribed to the map's undo topic)
   when the execution waits for the run's end (`DriveMode.waits_for_throws`: a manual
   `undo`, an interrupt's expiry, an in-process recovery);
2. a settled throw is acknowledged (its elements written to the map's acknowledgement slots,
   first wins: the count then equals the throw's `end` whatever undo job died before its own
   acknowledgement);
3. picks the next throw: the next `batch_size` completed elements below the last throw, highest
   index first; none left: every completed element is undone and the map's rollback closes
   (`undo.roll_back_map`);
4. writes the throw (before any of its jobs is enqueued), then enqueues the throw's highest
   element only: each undo job enqueues the throw's next element just before it calls the
   undo handler (`undo_job`), so undos start highest index first, at most `batch_size` at a
   time, and run concurrently.

The undo job whose acknowledgement brings the count to the throw's `end` publishes on the map's
undo topic and re-enqueues the run (one write sees that count: the owner is resumed once per
throw). An undo's outcome is saved in its element's slot before it is acknowledged, so a worker
killed mid element-rollback leaves the undos already saved as they are: only the cut-off one
runs again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from reactorflow import clock, config, records
from reactorflow.mapresults import PAGE_SIZE
from reactorflow.records import ElementRecord, UndoThrow
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.async_units import unit_lock
from reactorflow.runtime.engine.lockkeeper import ensure_live
from reactorflow.runtime.engine.map_reads import page
from reactorflow.runtime.engine.map_slot_keys import acks_key, job_key
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.rollback")

THROW = 2
"""The field of a map's job data (`fanout.job_key`) holding its rollback's current throw."""
ACKED = b"1"


def undo_topic(key: str) -> str:
    """The run's notification topic of a map's settled throws."""
    return f"{key}#undo"


def undo_lock(run_id: str, key: str, index: int) -> str:
    """The lock of one element's undo (not the element's own: that one may still be held, left
    to expire, by the job that ran the element)."""
    return unit_lock(run_id, f"{key}:{index}:undo")


def undoable(record: ElementRecord) -> bool:
    """A completed element whose undo has no saved outcome yet."""
    return record.status is StepStatus.COMPLETED and record.rollback_error is None


async def current_throw(storage: Storage, run_id: str, key: str) -> UndoThrow | None:
    raw = (await storage.load_elements(run_id, job_key(key), THROW, 1))[0]
    return None if raw is None else records.decode_throw(raw)


async def unsettled(storage: Storage, run_id: str, key: str, throw: UndoThrow) -> list[int]:
    """The throw's elements whose undo has no saved outcome, highest index first."""
    low, high = min(throw.indices), max(throw.indices)
    found = await page(storage, run_id, key, low, high - low + 1)
    return [i for i in throw.indices if undoable(found[i - low])]


async def roll_back_fanned(ex: Execution, node: Node, count: int) -> float | None:
    """Undo the map's completed elements with undo jobs (see the module docstring); None once
    every one is undone, else when its current throw went out (the run parks at the map)."""
    storage, key = ex.storage, node.key
    options = node.spec.map
    assert options is not None
    while True:
        throw = await current_throw(storage, ex.run_id, key)
        below = count
        if throw is not None:
            since = ex.parked_since.get(key, clock.now())
            left = await unsettled(storage, ex.run_id, key, throw)
            if left:
                if clock.now() - since >= config.settings().stall_timeout:
                    await _redispatch_lost(ex, node, left)
                    since = clock.now()
                if not ex.mode.waits_for_throws:
                    return since
                await _wait(ex, node, throw, since)
                continue
            await storage.save_elements(ex.run_id, acks_key(key),
                                        dict.fromkeys(throw.indices, ACKED), owner=ex.owner)
            below = min(throw.indices)
        indices = await _next_throw(ex, key, below, options.batch_size)
        if not indices:
            return None
        acked = await storage.count_elements(ex.run_id, acks_key(key))
        following = UndoThrow(acked + len(indices), indices)
        await storage.save_elements(ex.run_id, job_key(key), {THROW: records.encode(following)},
                                    replace=True, owner=ex.owner)  # before any job goes out
        ex.parked_since[key] = clock.now()
        queue.enqueue_undo(ex.run_id, ex.reactor, key, indices[0], version=ex.meta.version)
        if not ex.mode.waits_for_throws:
            return ex.parked_since[key]


async def _next_throw(ex: Execution, key: str, below: int, size: int) -> list[int]:
    """The next `size` undo-able elements under index `below`, highest first."""
    found: list[int] = []
    end = below
    while end > 0 and len(found) < size:
        start = max(0, end - PAGE_SIZE)
        slots = await page(ex.storage, ex.run_id, key, start, end - start)
        for index in range(end - 1, start - 1, -1):
            if undoable(slots[index - start]):
                found.append(index)
                if len(found) == size:
                    break
        end = start
    return found


async def throw_settled(ex: Execution, key: str) -> bool:
    """Whether the map's current throw settled (its last undo's signal may have come before
    the run parked: then nobody else re-enqueues it)."""
    throw = await current_throw(ex.storage, ex.run_id, key)
    return throw is None or not await unsettled(ex.storage, ex.run_id, key, throw)


async def _wait(ex: Execution, node: Node, throw: UndoThrow, since: float) -> None:
    """In this process: wait for the throw's last undo's signal (re-checked, and its lost jobs
    re-enqueued, every `stall_timeout`)."""
    stall = config.settings().stall_timeout
    async with ex.storage.subscribe(ex.run_id, undo_topic(node.key)) as subscription:
        while left := await unsettled(ex.storage, ex.run_id, node.key, throw):
            if clock.now() - since >= stall:
                await _redispatch_lost(ex, node, left)
                since = clock.now()
            await clock.wait_signal(subscription.wait, max(0.01, min(stall, 1.0)),
                                    why=f"the undo jobs of map {node.key!r}")
    ex.parked_since[node.key] = since


async def _redispatch_lost(ex: Execution, node: Node, left: list[int]) -> None:
    """Enqueue again the highest of the throw's unsettled undos whose lock nobody holds (its
    job was lost, or died with its worker): the chain from it enqueues the rest of the throw
    again, highest first (a duplicate of one still on its way finds its outcome saved, or its
    lock taken)."""
    for index in left:
        if await ex.storage.lock_owner(undo_lock(ex.run_id, node.key, index)) is None:
            await ensure_live(ex.lease)  # a lost lock dispatches nothing
            log.info("reactorflow.map.undo_redispatch run_id=%s step=%s index=%d", ex.run_id,
                     node.key, index)
            queue.enqueue_undo(ex.run_id, ex.reactor, node.key, index, version=ex.meta.version)
            return
