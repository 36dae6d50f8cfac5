"""The worker side of a fanned-out map: one element job (steps 1-4 of `fanout`'s docstring).

An element job reads only its own slot, its item and what the map's element jobs share
(`ElementArgs`), never the run; it writes only its own slot (and, for the first failure of an
atomic map, the map's stop marker). So its cost does not depend on the map's size or the run's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import config, pydantic_types, records
from reactorflow.definition.graph import plan_for
from reactorflow.definition.params import Source
from reactorflow.errors import LockLost
from reactorflow.protection import fields, sealing
from reactorflow.protection.resolve import run_keys
from reactorflow.records import ElementArgs, ElementRecord
from reactorflow.redaction import EVERY, secrets_in, watch
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_checks import drop, foreign_element
from reactorflow.runtime.engine.job_queue import Job
from reactorflow.runtime.engine.lockkeeper import keeper, renew_gates
from reactorflow.runtime.engine.map_reads import results_view
from reactorflow.runtime.engine.map_slot_keys import (
    ARGS,
    element_lock,
    items_key,
    job_key,
    settled_topic,
    starts_key,
)
from reactorflow.runtime.engine.ownership import keep_alive, new_owner
from reactorflow.runtime.gates.scope import GateHolds
from reactorflow.runtime.gates.step_gates import element_places
from reactorflow.runtime.maps.children import call_any_element
from reactorflow.runtime.maps.elements import JobScope, gated_child
from reactorflow.runtime.maps.fanout import NEXT, STOP
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.definition.reactor import Reactor
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.map")


def arguments_of(storage: Storage, scope: JobScope, node: Node, shared: ElementArgs
               ) -> dict[str, Any]:
    """The map's arguments (the element aside), decoded with each parameter's annotation."""
    kwargs: dict[str, Any] = {}
    for param in node.spec.params:
        if param.name in shared.lazy:
            ref, count = shared.lazy[param.name]
            kwargs[param.name] = results_view(storage, scope.keys, scope.plan.nodes[ref],
                                              count)
        elif param.name in shared.values:
            kwargs[param.name] = msgspec.msgpack.decode(
                scope.keys.open(fields.argument(node.key, param.name), shared.values[param.name]),
                type=param.annotation)
        elif param.source is Source.DEFAULT:
            kwargs[param.name] = param.default
    return kwargs


class ElementSecrets:
    """The redacted values an element job holds, masked as where they come from: its item (an
    item of the list the map maps over) and the map's shared arguments (see
    reactorflow.redaction: error text of the job is scrubbed of them)."""

    def __init__(self, node: Node, scope: JobScope, item: Any, kwargs: dict[str, Any]) -> None:
        masks = scope.plan.redactions
        options = node.spec.map
        assert options is not None
        over = masks.of_source(node.level, options.over, (), is_step=options.over_is_step)
        self.held = [(item, over.get(EVERY) if isinstance(over, dict) else over)]
        for param in node.spec.params:
            if param.name in kwargs and param.source in (Source.INPUT, Source.RESULT):
                self.held.append((kwargs[param.name], masks.of_source(
                    node.level, param.ref, param.path, is_step=param.source is Source.RESULT)))

    def secrets(self) -> set[str]:
        return {text for value, mask in self.held for text in secrets_in(value, mask)}


async def run_element(storage: Storage, reactor: Reactor, run_id: str, key: str,
                      index: int) -> None:
    """Run one element of a fanned-out map in a worker (see `fanout`)."""
    settings = config.settings()
    lock, owner = element_lock(run_id, key, index), new_owner()
    found = await storage.start_element(  # the lock, the fence, the reads: one round trip
        lock, owner, settings.lock_ttl, run_id,
        [(key, index, 1), (job_key(key), ARGS, 1), (items_key(key), index, 1)],
        starts=(starts_key(key), index), stop=(job_key(key), STOP))
    if found is None:
        return  # a duplicate of this element is running right now
    # the element's lock is left to expire once the outcome is stored (a duplicate then finds
    # the outcome; the owner looks for lost jobs among elements without one)
    async with keep_alive(storage, lock, owner, settings.lock_ttl, release=False) as hold:
        (own,), (shared_raw,), (item_raw,) = found.reads
        job = Job.element(run_id, reactor.name, key, index, version=reactor.version)
        problem = None if shared_raw is None else foreign_element(
            job, records.decode_element_args(shared_raw))
        if problem is not None:  # a forged job: the genuine one must find the lock free
            drop(job, problem)
            await storage.release_lock(lock, owner)
            return
        if own is not None:
            return  # already settled: a duplicate delivery
        if shared_raw is None or item_raw is None:
            log.error("reactorflow.map.orphaned run_id=%s step=%s index=%d: the run or its "
                      "map's job data is gone", run_id, key, index)
            return
        shared = records.decode_element_args(shared_raw)
        keys = await run_keys(storage, None, run_id)
        scope = JobScope(run_id, plan_for(reactor), keys, lease=hold)
        node = scope.plan.nodes[key]
        options = node.spec.map
        assert options is not None
        if found.refused:  # the map stopped, or the run ended or rolls back, before it started
            log.info("reactorflow.map.element_refused run_id=%s step=%s index=%d: its map is "
                     "closed, it never starts", run_id, key, index)
            record = ElementRecord(StepStatus.SKIPPED)  # its body never ran: nothing to undo
        else:  # (marked started: one whose body may have run before a crash runs again)
            element = node.spec.params[0]
            item = pydantic_types.decode(keys.open(fields.item(key, index), item_raw),
                                         element.annotation)
            kwargs = arguments_of(storage, scope, node, shared)
            kept = element_places(storage, run_id, node, kwargs) if node.spec.gates else None
            if kept is not None:  # the parked map's gates: renewed while its elements run
                await renew_gates(kept)
            if kept is None and gated_child(node):  # what its element reactor takes
                kept = GateHolds(storage, run_id)
            if kept is not None:
                kept.borrows = True  # the parked run's locks: re-entered, never released
                keeper.attach(hold, kept)
                scope = JobScope(run_id, scope.plan, keys, kept, lease=hold)
            if scope.plan.redactions:
                held = ElementSecrets(node, scope, item, kwargs)
                watch(held)  # held here while the element runs (sources are held weakly)
            try:
                with queue.immediate():  # its own work may wait for what it enqueues
                    record, _ = await call_any_element(scope, node, kwargs, index, item)
            except LockLost:  # its lock lapsed: a duplicate may own the element now
                log.warning("reactorflow.map.element_lock_lost run_id=%s step=%s index=%d: "
                            "the element stops, its outcome is left to whoever holds it",
                            run_id, key, index)
                return
        await settle(storage, run_id, reactor.name, key, index, sealing.element(keys, record),
                     version=reactor.version, atomic=options.atomic, total=shared.count)


async def shared_args(storage: Storage, run_id: str, key: str) -> ElementArgs | None:
    """What the element jobs of map `key` share (written by the run's owner when it fanned the
    map out), or None when it never did."""
    raw = (await storage.load_elements(run_id, job_key(key), ARGS, 1))[0]
    return None if raw is None else records.decode_element_args(raw)


async def settle(storage: Storage, run_id: str, reactor: str, key: str, index: int,
                 record: ElementRecord, *, atomic: bool, total: int | None,
                 version: int) -> None:
    """Store an element's outcome, then enqueue the next element of its chain, and signal the
    owner when this one settled the map (steps 2-4 of `fanout`'s docstring)."""
    stop = STOP if atomic and record.status is StepStatus.FAILED else None
    written = await storage.settle_element(run_id, key, index, records.encode(record),
                                           control=job_key(key), stop=stop, advance=NEXT)
    if written is None or written.written == 0:
        return  # the run is gone, or a duplicate stored first
    if written.closed:  # the run ended or rolls back: its rollback may wait for this element
        await storage.publish(run_id, settled_topic(key))  # an owner waiting in its process
        # a parked one (a job for an ended run does nothing)
        queue.enqueue_run(run_id, reactor, version=version)
        return
    if total is None:
        # let the owner look (its stall re-check dispatches what this element claimed)
        queue.enqueue_run(run_id, reactor, version=version)
        return
    if written.following is not None and written.following < total:
        queue.enqueue_element(run_id, reactor, key, written.following, version=version)
    if written.stored >= total:
        queue.enqueue_run(run_id, reactor, version=version)
