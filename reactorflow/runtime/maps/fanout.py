"""A fanned-out map (`fan_out=True`): one worker job per element, the run parked meanwhile.

The owner (the execution holding the run):

1. checkpoints the map `running`, then enqueues the first `batch_size` elements (checkpoint
   before enqueue) and parks the run: saved `running`, its lock released, nothing held;
2. each time it is taken on again (the last element's signal, the fallback re-check every
   `async_wait_timeout`, or the sweeper), reads how many elements are settled: all of them →
   the map completes, or fails with the first failure an atomic map recorded; else, once parked
   there for `stall_timeout`, it re-enqueues the elements of the dispatch window that hold
   neither an outcome nor their lock (jobs lost with a dead worker), and parks again.

An element job (`execute_element`), in a worker:

1. takes the element's own lock (`<run>:<map>:<index>`; held: a duplicate is running, end),
   reads the run (never locking or writing it) and runs the element (`elements.call_element`),
   or settles it `skipped` when an atomic map already stopped;
2. stores its outcome in its own slot, first wins (a duplicate that stored nothing ends here);
   an atomic failure also stores the map's stop marker (first wins: the first failure);
3. enqueues the next element (back pressure: one finished element, one more started, so never
   more than `batch_size` enqueued or in flight), via the run's dispatch counter;
4. the element whose write made every element settled re-enqueues the run (a first-wins
   signal: exactly one write sees the count reach the total).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from reactorflow import config, records
from reactorflow.definition.graph import plan_for
from reactorflow.errors import RecordedError
from reactorflow.mapresults import PAGE_SIZE
from reactorflow.records import ElementRecord, ErrorRecord
from reactorflow.runtime import queue
from reactorflow.runtime.execution import Execution
from reactorflow.runtime.maps.elements import call_element, source_of
from reactorflow.runtime.maps.inline import MapEnd
from reactorflow.runtime.maps.reading import page, prepare_readers
from reactorflow.runtime.ownership import acquire, keep_alive, new_owner
from reactorflow.runtime.stepcall import resolve_arguments
from reactorflow.runtime.units import unit_lock
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.definition.reactor import Reactor
    from reactorflow.middleware import Hooks
    from reactorflow.storage.base import Storage

log = logging.getLogger("reactorflow.map")


def element_lock(run_id: str, key: str, index: int) -> str:
    return unit_lock(run_id, f"{key}:{index}")


def _stop_key(key: str) -> str:
    """The map's stop marker: slot 0 holds the index of the first failed element."""
    return f"{key}#stop"


def _cursor(key: str) -> str:
    return f"map:{key}"


def start(ex: Execution, node: Node, count: int) -> None:
    """Enqueue the first `batch_size` elements (after the map's `running` checkpoint)."""
    options = node.spec.map
    assert options is not None
    for index in range(min(options.batch_size, count)):
        queue.enqueue_element(ex.run_id, ex.reactor, node.key, index)


async def collect(ex: Execution, node: Node, count: int) -> MapEnd | None:
    """How the map ended, or None while elements are still out. Once the run has been parked
    at the map for `stall_timeout`, elements of the dispatch window without an outcome whose
    lock nobody holds are taken for lost and enqueued again (a duplicate is harmless)."""
    storage, key = ex.storage, node.key
    stored = await storage.count_elements(ex.run_id, key)
    if stored < count:
        since = ex.parked_since.get(key)
        if since is not None and time.time() - since >= config.settings().stall_timeout:
            await _redispatch_lost(ex, node, count, stored)
        return None
    end = MapEnd(count)
    stop = (await storage.load_elements(ex.run_id, _stop_key(key), 0, 1))[0]
    if stop is not None:
        index = int(stop)
        error = (await page(storage, ex.run_id, key, index, 1))[0].error
        error = error or ErrorRecord("Exception", "")
        end.error = RecordedError(error.type, error.message, step=key)
        end.error_record, end.failed_index = error, index
    return end


def parks_on_map(ex: Execution) -> bool:
    """Whether the run is parked at a fanned-out map (it is then checked whenever taken on)."""
    return any(key in ex.plan.nodes and ex.plan.nodes[key].spec.map is not None
               for key in ex.state.parked_on)


async def parked_maps_settled(ex: Execution) -> bool:
    """Whether a map the run parked at has every element settled (its last element's signal
    may have come before the run parked: then nobody else re-enqueues it)."""
    for key in ex.state.parked_on:
        node = ex.plan.nodes.get(key)
        if node is None or node.spec.map is None:
            continue
        count = len(await source_of(ex, node))
        if await ex.storage.count_elements(ex.run_id, key) >= count:
            return True
    return False


async def _redispatch_lost(ex: Execution, node: Node, count: int, stored: int) -> None:
    options = node.spec.map
    assert options is not None
    window = min(count, stored + options.batch_size)
    for start_at in range(0, window, PAGE_SIZE):
        found = await ex.storage.load_elements(ex.run_id, node.key, start_at,
                                               min(PAGE_SIZE, window - start_at))
        for index, raw in enumerate(found, start_at):
            if raw is None and await ex.storage.lock_owner(
                    element_lock(ex.run_id, node.key, index)) is None:
                log.info("reactorflow.map.redispatch run_id=%s step=%s index=%d", ex.run_id,
                         node.key, index)
                queue.enqueue_element(ex.run_id, ex.reactor, node.key, index)


async def run_element(storage: Storage, reactor: Reactor, run_id: str, key: str, index: int,
                      hooks: Hooks) -> None:
    """Run one element of a fanned-out map in a worker (see the module docstring)."""
    reactor_name = reactor.name
    settings = config.settings()
    lock, owner = element_lock(run_id, key, index), new_owner()
    if not await acquire(storage, lock, owner, settings.lock_ttl, 0.0):
        return  # a duplicate of this element is running right now
    async with keep_alive(storage, lock, owner, settings.lock_ttl):
        if (await storage.load_elements(run_id, key, index, 1))[0] is not None:
            return  # already settled: a duplicate delivery
        stored = await storage.load_run(run_id)
        if stored is None:
            log.error("reactorflow.map.orphaned run_id=%s step=%s index=%d", run_id, key, index)
            return
        ex = Execution.from_stored(stored, plan=plan_for(reactor), storage=storage,
                                   owner=owner, claims={}, hooks=hooks)
        node = ex.plan.nodes[key]
        options = node.spec.map
        assert options is not None
        items = await source_of(ex, node)
        stopped = (await storage.load_elements(run_id, _stop_key(key), 0, 1))[0] is not None
        if stopped:
            record = ElementRecord(StepStatus.SKIPPED)
        else:
            await prepare_readers(ex, node)
            record, _ = await call_element(ex, node, resolve_arguments(ex, node), index,
                                           items[index])
        await settle(storage, run_id, reactor_name, key, index, record,
                     atomic=options.atomic, total=len(items), batch_size=options.batch_size)


async def settle(storage: Storage, run_id: str, reactor: str, key: str, index: int,
                 record: ElementRecord, *, atomic: bool, total: int | None,
                 batch_size: int = 1) -> None:
    """Store an element's outcome, then start the next element and signal the owner when
    this one settled the map (steps 2-4 of the module docstring)."""
    written = await storage.save_elements(run_id, key, {index: records.encode(record)})
    if written is None or written.written == 0:
        return  # the run is gone, or a duplicate stored first
    if atomic and record.status is StepStatus.FAILED:
        await storage.save_elements(run_id, _stop_key(key), {0: str(index).encode()})
    if total is None:
        queue.enqueue_run(run_id, reactor)  # let the owner look: it cannot be mapped here
        return
    following = await storage.incr_counter(run_id, _cursor(key)) + batch_size - 1
    if 0 < following < total:
        queue.enqueue_element(run_id, reactor, key, following)
    if written.stored >= total:
        queue.enqueue_run(run_id, reactor)

