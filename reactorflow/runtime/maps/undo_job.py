"""The worker side of a fanned-out map's rollback: one undo job (see `undo_throws` for the owner's).

An undo job, for element `index` of map `key`:

1. takes the element's undo lock (held: a duplicate is undoing it right now, end), then reads
   the element's slot, its item, the map's shared arguments and the current throw in one round
   trip (never the run);
2. an element of the current throw whose undo has no saved outcome: enqueues the throw's next
   element (so undos start highest index first), then calls the map's undo handler (or undoes
   the element reactor's child steps, newest first, each saved in the slot as it returns: a
   killed job's successor resumes after the last saved one) and saves the outcome in the
   element's slot — `undone`, or
   still completed with its undo's error; an element already settled only passes the chain on;
3. acknowledges the element (first wins); the acknowledgement that brings the count to the
   throw's `end` publishes on the map's undo topic and re-enqueues the run.

An element that is not in the current throw (a late duplicate of an earlier throw's job) is left
as it is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from reactorflow import config, pydantic_types, records
from reactorflow.definition.graph import plan_for
from reactorflow.errors import LockLost
from reactorflow.protection import fields, sealing
from reactorflow.protection.resolve import run_keys
from reactorflow.records import ErrorRecord, UndoThrow
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_checks import drop, foreign_element
from reactorflow.runtime.engine.job_queue import Job
from reactorflow.runtime.engine.lockkeeper import ensure_live
from reactorflow.runtime.engine.map_slot_keys import ARGS, acks_key, items_key, job_key
from reactorflow.runtime.engine.ownership import keep_alive, new_owner
from reactorflow.runtime.maps.element_job import arguments_of
from reactorflow.runtime.maps.elements import JobScope
from reactorflow.runtime.maps.undo import undo_element
from reactorflow.runtime.maps.undo_throws import (
    ACKED,
    THROW,
    undo_lock,
    undo_topic,
    undoable,
)

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.rollback")


async def run_undo(storage: Storage, reactor: Reactor, run_id: str, key: str,
                   index: int) -> None:
    """Undo one completed element of a fanned-out map in a worker (see the module docstring)."""
    settings = config.settings()
    lock, owner = undo_lock(run_id, key, index), new_owner()
    found = await storage.lock_and_load_elements(
        lock, owner, settings.lock_ttl, run_id,
        [(key, index, 1), (job_key(key), ARGS, 3), (items_key(key), index, 1)])
    if found is None:
        return  # a duplicate of this undo is running right now
    async with keep_alive(storage, lock, owner, settings.lock_ttl) as hold:
        (own,), (shared_raw, _stop, throw_raw), (item_raw,) = found
        job = Job.undo(run_id, reactor.name, key, index, version=reactor.version)
        problem = None if shared_raw is None else foreign_element(
            job, records.decode_element_args(shared_raw))
        if problem is not None:
            drop(job, problem)
            return
        if own is None or shared_raw is None or item_raw is None or throw_raw is None:
            log.error("reactorflow.map.undo_orphaned run_id=%s step=%s index=%d: the run or "
                      "its map's job data is gone", run_id, key, index)
            return
        throw = records.decode_throw(throw_raw)
        if index not in throw.indices:
            return  # a late duplicate of an earlier throw: settled then
        record = records.decode_element(own)
        position = throw.indices.index(index)
        following = throw.indices[position + 1:position + 2]
        if undoable(record):
            keys = await run_keys(storage, None, run_id)
            scope = JobScope(run_id, plan_for(reactor), keys, lease=hold)
            node = scope.plan.nodes[key]
            options = node.spec.map
            assert options is not None
            item = pydantic_types.decode(keys.open(fields.item(key, index), item_raw),
                                         node.spec.params[0].annotation)
            base = arguments_of(storage, scope, node, records.decode_element_args(shared_raw))
            try:
                await ensure_live(hold)  # a lost lock starts no undo
                for successor in following:  # started highest index first
                    queue.enqueue_undo(run_id, reactor.name, key, successor,
                                       version=reactor.version)
                await undo_element(scope, node, base, item, index, record)
            except LockLost:  # its lock lapsed: a duplicate may be undoing it now
                log.warning("reactorflow.map.undo_lock_lost run_id=%s step=%s index=%d: the "
                            "undo stops, its outcome is left to whoever holds it", run_id, key,
                            index)
                return
            await storage.save_elements(
                run_id, key, {index: records.encode(sealing.element(keys, record))},
                replace=True)
        else:
            for successor in following:
                queue.enqueue_undo(run_id, reactor.name, key, successor,
                                   version=reactor.version)
    await _acknowledge(storage, run_id, reactor.name, key, index, throw,
                      version=reactor.version)


async def _acknowledge(storage: Storage, run_id: str, reactor: str, key: str, index: int,
                       throw: UndoThrow, *, version: int) -> None:
    written = await storage.save_elements(run_id, acks_key(key), {index: ACKED})
    if written is not None and written.written and written.stored == throw.end:
        await storage.publish(run_id, undo_topic(key))  # an owner waiting in its process
        queue.enqueue_run(run_id, reactor, version=version)  # a parked owner


async def give_up(storage: Storage, run_id: str, reactor: str, key: str, index: int,
                  kind: str, reason: str, *, version: int) -> None:
    """An undo job that can never run (its reactor unknown here, its retries used up): its
    element's undo is failed with the reason, and acknowledged. Nothing is written for an
    element the map's current throw does not undo (a late duplicate, or a forged job)."""
    (own,), (throw_raw,) = await storage.load_element_ranges(
        run_id, [(key, index, 1), (job_key(key), THROW, 1)])
    if own is None or throw_raw is None:
        return
    throw = records.decode_throw(throw_raw)
    if index not in throw.indices:
        return
    record = records.decode_element(own)
    if undoable(record):
        record = msgspec.structs.replace(record, rollback_error=ErrorRecord(kind, reason))
        keys = await run_keys(storage, None, run_id)
        await storage.save_elements(
            run_id, key, {index: records.encode(sealing.element(keys, record))}, replace=True)
    await _acknowledge(storage, run_id, reactor, key, index, throw, version=version)

