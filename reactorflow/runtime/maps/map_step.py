"""The map step kind (`kinds.KindHandler`, registered by `runtime.maps`): a map step in the
forward drive (open it, run its elements, say how it ended), its rollback (`undo`), and how a
run parked at it is looked at again.

1. A map met for the first time is checkpointed `running` (`step.started`) before any element
   runs; one met `running` (after a crash) resumes: only elements without a stored outcome run.
2. Its elements run: inline (`inline.run_inline`), or as worker jobs while the run parks
   (`fanout`: the map is met again when they settled); their outcomes go to the map's element
   slots.
3. It ends `completed`, its record carrying the element count (readers page the results from
   the slots), or failed with the first failing element's error (an atomic map).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reactorflow import clock, records
from reactorflow.errors import ArgumentError
from reactorflow.protection.fields import ERROR
from reactorflow.records import ErrorRecord, Event, StepRecord
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.kinds import KindHandler
from reactorflow.runtime.engine.stepcall import arguments
from reactorflow.runtime.gates.step_gates import enter_whole, leave_whole
from reactorflow.runtime.maps import fanout
from reactorflow.runtime.maps.elements import source_of
from reactorflow.runtime.maps.inflight import in_flight
from reactorflow.runtime.maps.inline_window import run_inline
from reactorflow.runtime.maps.progress import opened_detail
from reactorflow.runtime.maps.undo import roll_back_map
from reactorflow.runtime.maps.undo_throws import throw_settled
from reactorflow.status import EventKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.runtime.engine.forward import Forward


@dataclass(slots=True)
class MapStepEnd:
    """A completed map's record and events, or the failure of an atomic one."""

    record: StepRecord | None = None
    events: list[Event] = field(default_factory=list)
    error: BaseException | None = None
    error_record: ErrorRecord | None = None
    started_at: float | None = None
    detail: str = ""
    parked: bool = False  # a fanned-out map whose elements are still out


async def run_map(ex: Execution, node: Node, kwargs: dict[str, Any]) -> MapStepEnd:
    """Run a map step whose arguments (`kwargs`, the element aside) are resolved.

    Raises:
        ArgumentError: what it maps over is not a list or tuple in this run.
    """
    key = node.key
    record = ex.record(key)
    resumed = record.status == StepStatus.RUNNING
    items = await source_of(ex, node)
    started = record.started_at if resumed and record.started_at else clock.now()
    options = node.spec.map
    assert options is not None
    if not resumed:
        opened = StepRecord(StepStatus.RUNNING, 1, started)
        await ex.writer.checkpoint(key, opened, [event(EventKind.STEP_STARTED, key, 1,
                                                       opened_detail(len(items)))])
    fanned = options.fan_out and not ex.mode.maps_inline  # a map nested in an element: inline
    if fanned and (not resumed or not await fanout.started(ex, node)):
        await fanout.start(ex, node, kwargs, items)  # checkpoint before enqueue
    if fanned:
        found = await fanout.collect(ex, node, len(items))
        if found is None:
            return MapStepEnd(parked=True)
        end = found
    else:
        end = await run_inline(ex, node, kwargs, items, resumed=resumed)
    if end.failed_index is not None:
        assert end.error is not None and end.error_record is not None
        detail = (f"element {end.failed_index}: {end.error_record.type}: "
                  f"{ex.keys.shown_text(ERROR, end.error_record.message)}")
        return MapStepEnd(error=end.error, error_record=end.error_record, started_at=started,
                          detail=detail)
    done = StepRecord(StepStatus.COMPLETED, 1, started, clock.now(), records.raw(end.count),
                      seq=ex.writer.next_seq())
    return MapStepEnd(done, [event(EventKind.STEP_COMPLETED, key, detail=f"{end.count} elements")])


async def forward_map(drive: Forward, node: Node) -> None:
    """A map step in the forward drive: completes, or fails with its first failed element, or
    (fanned out) parks the run until its elements settled."""
    ex = drive.ex
    try:
        kwargs = await arguments(ex, node)
        if (ex.status_of(node.key) != StepStatus.RUNNING
                and await drive._skipped_by_when(node, kwargs)):
            return
        entry = await enter_whole(ex, node, kwargs) if node.spec.gates else None
        if entry is not None and not entry.admitted:
            await drive._refused(node, entry)
            return
        end = None
        try:
            end = await run_map(ex, node, kwargs)
        finally:
            await leave_whole(ex, entry, completed=end is not None and end.record is not None,
                              parked=end is not None and end.parked)
    except ArgumentError as exc:
        await drive._fail_step(node, exc, detail=str(exc))
        return
    if end.parked:  # fanned out: the run parks until its elements settled
        drive.parked[node.key] = ex.parked_since.get(node.key, clock.now())
        return
    if end.record is None:
        assert end.error is not None
        await drive._fail_step(node, end.error, detail=end.detail,
                               started_at=end.started_at, error_record=end.error_record)
        return
    await drive._finish(node, end.record, end.events)


async def elements_settled(ex: Execution, key: str) -> bool:
    """Whether every element of the map the run parked at has settled."""
    count = len(await source_of(ex, ex.plan.nodes[key]))
    return await ex.storage.count_elements(ex.run_id, key) >= count


async def undo_settled(ex: Execution, key: str) -> bool:
    """Whether a rollback parked at the map may go on: no element in flight, and its current
    undo throw settled."""
    return not await in_flight(ex.storage, ex.run_id, key) and await throw_settled(ex, key)


HANDLER = KindHandler(forward_map, roll_back=roll_back_map,
                      settled_while_parked=elements_settled, undone_while_parked=undo_settled)
"""The map step kind, as the engine's step-kind table holds it."""
