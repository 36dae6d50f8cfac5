"""The worker side of a fanned-out map: one element job (steps 1-4 of `fanout`'s docstring).

An element job reads only its own slot, its item and what the map's element jobs share
(`ElementArgs`), never the run; it writes only its own slot (and, for the first failure of an
atomic map, the map's stop marker). So its cost does not depend on the map's size or the run's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import clock, config, pydantic_types, records
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
from reactorflow.runtime.engine.lockkeeper import Hold, keeper, renew_gates
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
from reactorflow.runtime.maps import chunks
from reactorflow.runtime.maps.children import call_any_element
from reactorflow.runtime.maps.elements import JobScope, gated_child
from reactorflow.runtime.maps.fanout import NEXT, STOP
from reactorflow.status import StepStatus
from reactorflow.storage.contract.values import Claim

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.definition.reactor import Reactor
    from reactorflow.protection.keys import RunKeys
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


async def run_chunk(storage: Storage, reactor: Reactor, run_id: str, key: str, first: int,
                    count: int) -> None:
    """Run elements `first` .. `first + count - 1` of a fanned-out map in a worker, one after
    the other, each on its own (see `fanout`: its lock, its mark, its outcome; a chunk is only
    how they reached this job, `chunks`)."""
    chunk = _Chunk(storage, reactor, run_id, key, first, count)
    for index in range(first, first + count):
        if not await chunk.run(index):
            return


class _Chunk:
    """What the elements of one job share: the map's job data and arguments (read and decoded
    once, with the first element's start) and the chunk's sizer."""

    __slots__ = ("count", "first", "key", "keys", "kwargs", "node", "reactor", "run_id",
                 "scope", "shared", "sizer", "storage")

    def __init__(self, storage: Storage, reactor: Reactor, run_id: str, key: str, first: int,
                 count: int) -> None:
        self.storage, self.reactor, self.run_id, self.key = storage, reactor, run_id, key
        self.first, self.count = first, count
        self.shared: ElementArgs | None = None
        self.scope: JobScope | None = None
        self.node: Node | None = None
        self.kwargs: dict[str, Any] = {}
        self.sizer: chunks.Sizer | None = None
        self.keys: RunKeys | None = None  # the run's (resolved once, with the job data)

    async def run(self, index: int) -> bool:
        """Run element `index` (steps 1-4 of `fanout`'s docstring); False when the rest of
        the chunk must not run (a forged job, or the map's job data is gone)."""
        storage, run_id, key = self.storage, self.run_id, self.key
        settings = config.settings()
        lock, owner = element_lock(run_id, key, index), new_owner()
        reads = [(key, index, 1), (items_key(key), index, 1)]
        if self.shared is None:
            reads.append((job_key(key), ARGS, 1))
        found = await storage.start_element(  # the lock, the fence, the reads: one round trip
            lock, owner, settings.lock_ttl, run_id, reads,
            starts=(starts_key(key), index), stop=(job_key(key), STOP))
        if found is None:
            return True  # a duplicate of this element is running right now
        # the element's lock is left to expire once the outcome is stored (a duplicate then
        # finds the outcome; the owner looks for lost jobs among elements without one)
        async with keep_alive(storage, lock, owner, settings.lock_ttl, release=False) as hold:
            (own,), (item_raw,), *rest = found.reads
            if rest and not await self._admit(rest[0][0], lock, owner):
                return False
            if own is not None:
                return True  # already settled: a duplicate delivery
            if self.shared is None or item_raw is None:
                log.error("reactorflow.map.orphaned run_id=%s step=%s index=%d: the run or its "
                          "map's job data is gone", run_id, key, index)
                return False
            record = await self._outcome(index, item_raw, hold, refused=found.refused)
            if record is None:
                return True  # its lock was lost: its outcome is left to whoever holds it
        await self._settle(index, record)
        return True

    async def _admit(self, shared_raw: bytes | None, lock: str, owner: str) -> bool:
        """Check the job against its map's job data (the first element's read) and keep what
        the chunk's elements share; False for a forged job (dropped: the genuine one must find
        the lock free)."""
        if shared_raw is None:
            return True  # (reported as orphaned by the caller)
        shared = records.decode_element_args(shared_raw)
        job = Job.element(self.run_id, self.reactor.name, self.key, self.first,
                          version=self.reactor.version, count=self.count)
        problem = foreign_element(job, shared)
        if problem is not None:
            drop(job, problem)
            await self.storage.release_lock(lock, owner)
            return False
        self.shared = shared
        self.keys = await run_keys(self.storage, None, self.run_id)
        self.scope = JobScope(self.run_id, plan_for(self.reactor), self.keys)
        self.node = node = self.scope.plan.nodes[self.key]
        options = node.spec.map
        assert options is not None
        self.sizer = chunks.Sizer(options)
        self.kwargs = arguments_of(self.storage, self.scope, node, shared)
        return True

    async def _outcome(self, index: int, item_raw: bytes, hold: Hold, *,
                       refused: bool) -> ElementRecord | None:
        """The element's outcome: its body's (it is marked started: one whose body may have
        run before a crash runs again), or `skipped` when `refused`; None when its lock was
        lost while it ran."""
        storage, run_id, key = self.storage, self.run_id, self.key
        node, scope, sizer = self.node, self.scope, self.sizer
        assert node is not None and scope is not None and sizer is not None
        if refused:  # the map stopped, or the run ended or rolls back, before it started
            log.info("reactorflow.map.element_refused run_id=%s step=%s index=%d: its map is "
                     "closed, it never starts", run_id, key, index)
            return ElementRecord(StepStatus.SKIPPED)  # its body never ran: nothing to undo
        element = node.spec.params[0]
        keys = self.keys
        assert keys is not None
        item = pydantic_types.decode(keys.open(fields.item(key, index), item_raw),
                                     element.annotation)
        kwargs = self.kwargs
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
        began = clock.monotonic()  # (a fake clock's time in the test kit)
        try:
            with queue.immediate():  # its own work may wait for what it enqueues
                record, _ = await call_any_element(scope, node, kwargs, index, item)
        except LockLost:  # its lock lapsed: a duplicate may own the element now
            log.warning("reactorflow.map.element_lock_lost run_id=%s step=%s index=%d: "
                        "the element stops, its outcome is left to whoever holds it",
                        run_id, key, index)
            return None
        sizer.ran(clock.monotonic() - began)
        return record

    async def _settle(self, index: int, record: ElementRecord) -> None:
        node, shared, sizer, keys = self.node, self.shared, self.sizer, self.keys
        assert node is not None and shared is not None and sizer is not None and keys is not None
        options = node.spec.map
        assert options is not None
        await settle(self.storage, self.run_id, self.reactor.name, self.key, index,
                     sealing.element(keys, record),
                     version=self.reactor.version, atomic=options.atomic, total=shared.count,
                     window=options.batch_size, want=sizer.want())


async def shared_args(storage: Storage, run_id: str, key: str) -> ElementArgs | None:
    """What the element jobs of map `key` share (written by the run's owner when it fanned the
    map out), or None when it never did."""
    raw = (await storage.load_elements(run_id, job_key(key), ARGS, 1))[0]
    return None if raw is None else records.decode_element_args(raw)


async def settle(storage: Storage, run_id: str, reactor: str, key: str, index: int,
                 record: ElementRecord, *, atomic: bool, total: int | None,
                 version: int, window: int = 0, want: int = 1) -> None:
    """Store an element's outcome, then enqueue the elements it claimed (as chunks of `want`:
    within the map's `window` of `batch_size` when given, else one), and signal the owner when
    this one settled the map (steps 2-4 of `fanout`'s docstring)."""
    stop = STOP if atomic and record.status is StepStatus.FAILED else None
    claim = Claim(want, window, total) if window and total is not None else None
    written = await storage.settle_element(run_id, key, index, records.encode(record),
                                           control=job_key(key), stop=stop, advance=NEXT,
                                           claim=claim)
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
        claimed = min(written.claimed, total - written.following)
        for start, count in chunks.split(written.following, claimed, max(1, want)):
            queue.enqueue_element(run_id, reactor, key, start, version=version, count=count)
    if written.stored >= total:
        queue.enqueue_run(run_id, reactor, version=version)
