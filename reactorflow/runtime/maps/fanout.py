"""A fanned-out map (`fan_out=True`): one worker job per element, the run parked meanwhile.

The owner (the execution holding the run):

1. checkpoints the map `running`, writes what the element jobs share (each element's item and
   the map's resolved arguments, encoded once: `ElementArgs`), then enqueues the first
   `batch_size` elements (checkpoint before enqueue) and parks the run: saved `running`, its
   lock released, nothing held;
2. each time it is taken on again (the last element's signal, the fallback re-check every
   `async_wait_timeout`, or the sweeper), reads how many elements are settled: all of them →
   the map completes, or fails with the first failure an atomic map recorded; else, once parked
   there for `stall_timeout`, it re-enqueues the elements of the dispatch window that hold
   neither an outcome nor their lock (jobs lost with a dead worker), and parks again.

An element job (`element_job.run_element`), in a worker:

1. takes the element's own lock (`<run>:<map>:<index>`; held: a duplicate is running, end;
   kept alive while the element runs, then left to expire: its outcome guards it from then on),
   reads its item and the shared arguments (never the run: its cost does not grow with the
   map) and runs the element (`elements.call_element`), or settles it `skipped` when an atomic
   map already stopped and the element never started (an atomic map's element is marked
   started, `keys.starts_key`, before its body runs: one cut off by a crash is run again, so
   its outcome is known and its rollback undoes it);
2. stores its outcome in its own slot, first wins (a duplicate that stored nothing ends here);
   an atomic failure also stores the map's stop marker (first wins: the first failure), in the
   same atomic call;
3. enqueues the element it claimed with its outcome's write (the map's dispatch counter,
   advanced in the same atomic call: back pressure, one element settled, one more enqueued, so
   never more than `batch_size` enqueued or in flight; and elements are enqueued in index order
   across the whole map);
4. the element whose write made every element settled re-enqueues the run (a first-wins
   signal: exactly one write sees the count reach the total).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from reactorflow import clock, config, records
from reactorflow.definition.graph import join
from reactorflow.definition.params import MapRead, Source
from reactorflow.errors import RecordedError
from reactorflow.mapresults import PAGE_SIZE
from reactorflow.protection import fields
from reactorflow.protection.fields import ERROR
from reactorflow.records import ElementArgs, ErrorRecord
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.lockkeeper import ensure_live
from reactorflow.runtime.engine.map_reads import element_count, page
from reactorflow.runtime.engine.map_slot_keys import ARGS, element_lock, items_key, job_key
from reactorflow.runtime.maps.inline_window import MapEnd

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node, Plan
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.map")

STOP, NEXT = 1, 3
"""Fields of a map's shared job data (`<map>#job`, beside `map_slot_keys.ARGS`, its
`ElementArgs`): its stop marker (the index of the first failed element of an atomic map, first
wins) and its dispatch counter (the next element index to enqueue; field 2 is its rollback's,
see `undo_throws`)."""


def shared_arguments(ex: Execution, node: Node, kwargs: dict[str, Any], count: int
                     ) -> ElementArgs:
    """The map's resolved arguments as element jobs receive them (encoded once)."""
    values: dict[str, Any] = {}
    lazy: dict[str, tuple[str, int]] = {}
    for param in node.spec.params:
        if param.source in (Source.ELEMENT, Source.CONTEXT, Source.DEFAULT):
            continue
        if param.map_read is MapRead.LAZY and not param.path:
            ref = join(node.level, param.ref)
            lazy[param.name] = (ref, element_count(ex, ref))
            continue
        values[param.name] = ex.keys.seal_raw(fields.argument(node.key, param.name),
                                              records.encode(kwargs[param.name]))
    return ElementArgs(count, values, lazy, ex.reactor)


async def start(ex: Execution, node: Node, kwargs: dict[str, Any],
                items: list[Any] | tuple[Any, ...]) -> None:
    """Write what the element jobs share, then enqueue the first `batch_size` elements (after
    the map's `running` checkpoint). Safe to repeat: every write is first-wins."""
    options = node.spec.map
    assert options is not None
    storage, key = ex.storage, node.key
    for start_at in range(0, len(items), PAGE_SIZE):
        chunk = items[start_at:start_at + PAGE_SIZE]
        await storage.save_elements(ex.run_id, items_key(key), {
            i: ex.keys.seal(fields.item(key, i), records.encode(item))
            for i, item in enumerate(chunk, start_at)}, owner=ex.owner)
    shared = shared_arguments(ex, node, kwargs, len(items))
    first = min(options.batch_size, len(items))
    await storage.save_elements(ex.run_id, job_key(key), {ARGS: records.encode(shared),
                                                          NEXT: str(first).encode()},
                                owner=ex.owner)  # fenced: a zombie enqueues nothing
    for index in range(first):
        queue.enqueue_element(ex.run_id, ex.reactor, key, index, version=ex.meta.version)


async def started(ex: Execution, node: Node) -> bool:
    """Whether the map's element jobs were given what they share (the owner may have died
    between the map's checkpoint and that write)."""
    return (await ex.storage.load_elements(ex.run_id, job_key(node.key), ARGS, 1))[0] is not None


async def collect(ex: Execution, node: Node, count: int) -> MapEnd | None:
    """How the map ended, or None while elements are still out. Once the run has been parked
    at the map for `stall_timeout`, elements whose job was lost are enqueued again (see
    `_redispatch_lost`; a duplicate is harmless)."""
    storage, key = ex.storage, node.key
    stored = await storage.count_elements(ex.run_id, key)
    if stored < count:
        since = ex.parked_since.get(key)
        if since is not None and clock.now() - since >= config.settings().stall_timeout:
            await _redispatch_lost(ex, node, count)
        return None
    end = MapEnd(count)
    stop = (await storage.load_elements(ex.run_id, job_key(key), STOP, 1))[0]
    if stop is not None:
        index = int(stop)
        error = (await page(storage, ex.run_id, key, index, 1))[0].error
        error = error or ErrorRecord("Exception", "")
        end.error = RecordedError(error.type, ex.keys.shown_text(ERROR, error.message), step=key)
        end.error_record, end.failed_index = error, index
    return end


async def untaken_map(storage: Storage, run_id: str, plan: Plan, parked_on: Iterable[str]
                      ) -> str | None:
    """The first fanned-out map the run is parked at (`parked_on`) whose elements were handed
    to workers and none taken: no element has an outcome and none of those dispatched holds
    its lock. None when there is no such map."""
    for key in parked_on:
        node = plan.nodes.get(key)
        if node is None or node.spec.map is None:
            continue
        raw = (await storage.load_elements(run_id, job_key(key), NEXT, 1))[0]
        if raw is None or await storage.count_elements(run_id, key) > 0:
            continue  # not handed out yet, or a worker settled one
        held = [await storage.lock_owner(element_lock(run_id, key, index))
                for index in range(int(raw))]  # at most batch_size: none settled
        if all(owner is None for owner in held):
            return key
    return None


def parks_on_map(ex: Execution) -> bool:
    """Whether the run is parked at a fanned-out map (it is then checked whenever taken on)."""
    return any(key in ex.plan.nodes and ex.plan.nodes[key].spec.map is not None
               for key in ex.state.parked_on)


async def _redispatch_lost(ex: Execution, node: Node, count: int) -> None:
    """Every element below the dispatch counter was enqueued (the first `batch_size` by the
    owner, each further one by the element whose outcome claimed it); one of them without an
    outcome whose lock nobody holds is out in no worker: its job was lost (or is still queued:
    a duplicate is harmless)."""
    storage = ex.storage
    raw = (await storage.load_elements(ex.run_id, job_key(node.key), NEXT, 1))[0]
    dispatched = min(count, int(raw) if raw is not None else count)
    for start_at in range(0, dispatched, PAGE_SIZE):
        found = await storage.load_elements(ex.run_id, node.key, start_at,
                                            min(PAGE_SIZE, dispatched - start_at))
        for index, outcome in enumerate(found, start_at):
            if outcome is not None or await storage.lock_owner(
                    element_lock(ex.run_id, node.key, index)) is not None:
                continue
            await ensure_live(ex.lease)  # a lost lock dispatches nothing
            log.info("reactorflow.map.redispatch run_id=%s step=%s index=%d", ex.run_id,
                     node.key, index)
            queue.enqueue_element(ex.run_id, ex.reactor, node.key, index, version=ex.meta.version)
