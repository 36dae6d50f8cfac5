"""A fanned-out map's elements still in flight when its rollback begins (the owner's side).

The save that begins a run's rollback (status `rolling_back`), like any save that ends the run,
closes its maps: from then on storage refuses every element that has not started yet
(`Storage.start_element`, atomically with that save), and a settling element claims no
successor. Elements that started before it may still be running in workers, though, and an
element cut off by a crash runs again. So before a fanned-out map that is still `running` rolls
back, the owner waits until every element marked started holds an outcome:

1. it reads the map's dispatch window (elements 0 .. the dispatch counter: every element ever
   enqueued) page by page, and finds those marked started without an outcome: in flight;
2. none: the map's rollback goes on (`undo.roll_back_map`), and sees every element that ran,
   late ones included: each completed one is undone exactly once (its undo's outcome is saved
   in its slot), each failed one compensated itself;
3. else it waits, parked (the run saved `rolling_back` with the map in `parked_on`, holding
   nothing, taken on again by each late element's settle, which re-enqueues the run, or by the
   periodic re-check), or in this process (subscribed to the map's settled topic) when the
   execution waits for the run's end (`DriveMode.waits_for_throws`); once it has waited
   `stall_timeout`, an element in flight whose lock nobody holds (its worker died) is enqueued
   again: it was marked, so it runs again, to a known outcome.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from reactorflow import clock, config, records
from reactorflow.mapresults import PAGE_SIZE
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.lockkeeper import ensure_live
from reactorflow.runtime.engine.map_slot_keys import (
    ARGS,
    element_lock,
    job_key,
    settled_topic,
    starts_key,
)
from reactorflow.runtime.maps.fanout import NEXT

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.rollback")


async def in_flight(storage: Storage, run_id: str, key: str) -> list[int]:
    """The elements of fanned-out map `key` marked started that hold no outcome, in index
    order (none when its element jobs were never given their data)."""
    shared_raw, _stop, _throw, counter = await storage.load_elements(run_id, job_key(key), ARGS,
                                                                     NEXT - ARGS + 1)
    if shared_raw is None:
        return []
    count = records.decode_element_args(shared_raw).count
    window = min(count, int(counter) if counter is not None else count)
    found: list[int] = []
    for start in range(0, window, PAGE_SIZE):
        size = min(PAGE_SIZE, window - start)
        outcomes, marks = await storage.load_element_ranges(
            run_id, [(key, start, size), (starts_key(key), start, size)])
        found.extend(index for index, (outcome, mark) in enumerate(zip(outcomes, marks,
                                                                       strict=True), start)
                     if mark is not None and outcome is None)
    return found


async def wait_in_flight(ex: Execution, node: Node) -> float | None:
    """None once no element of the map is in flight (see the module docstring); else, when the
    execution parks instead of waiting here, since when the run waits at the map."""
    storage, key = ex.storage, node.key
    since = ex.parked_since.get(key, clock.now())
    if ex.mode.waits_for_throws:
        async with storage.subscribe(ex.run_id, settled_topic(key)) as subscription:
            while await _still_out(ex, node, since):
                await clock.wait_signal(subscription.wait, _recheck())
                since = ex.parked_since[key]
    elif await _still_out(ex, node, since):
        return ex.parked_since[key]
    ex.parked_since.pop(key, None)  # (its throws count their own time from here)
    return None


def _recheck() -> float:
    """Seconds between re-checks of a wait in this process (a lost signal, a stall)."""
    return max(0.01, min(config.settings().stall_timeout, 1.0))


async def _still_out(ex: Execution, node: Node, since: float) -> bool:
    """Whether elements are in flight; once the map has waited `stall_timeout` for them, those
    cut off are enqueued again (the wait's time then counts from now: `parked_since`)."""
    left = await in_flight(ex.storage, ex.run_id, node.key)
    if left and clock.now() - since >= config.settings().stall_timeout:
        await _redispatch_cut_off(ex, node, left)
        since = clock.now()
    ex.parked_since[node.key] = since
    if left:
        log.info("reactorflow.map.rollback_waits run_id=%s step=%s in_flight=%d", ex.run_id,
                 node.key, len(left))
    return bool(left)


async def _redispatch_cut_off(ex: Execution, node: Node, left: list[int]) -> None:
    """Enqueue again each element in flight whose lock nobody holds (its job died with its
    worker; a duplicate of one still on its way finds the lock taken or the outcome stored)."""
    for index in left:
        if await ex.storage.lock_owner(element_lock(ex.run_id, node.key, index)) is None:
            await ensure_live(ex.lease)  # a lost lock dispatches nothing
            log.info("reactorflow.map.redispatch run_id=%s step=%s index=%d", ex.run_id,
                     node.key, index)
            queue.enqueue_element(ex.run_id, ex.reactor, node.key, index, version=ex.meta.version)
