"""A step's own gates: taken around its attempts, re-taken (locks and semaphores only) around
its rollback handlers, and checked against the run's holds before an async unit is dispatched.

Around the attempts (`call_gated`), in order: the arguments are resolved and `when=` applied
(a skipped step takes nothing); the gates are taken for the step's scope (its key); a used
period skips the step; a busy gate fails the step with `rf.GateBusy` in a caller (its body
never ran, so its compensate does not run), or snoozes it in a worker (nothing taken, no attempt
counted); then the attempts run, retries included, under the gates; the places are given back
(shielded) and, when the step completed, its periods recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from reactorflow import clock, config
from reactorflow.definition.gates import BoundGate, GateKind, Lock, OrderedLock, Period, Semaphore
from reactorflow.definition.params import MISSING
from reactorflow.errors import ArgumentError, GateBusy, GateDeadlock, GateKeyError
from reactorflow.records import summary
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.stepcall import (
    Outcome,
    StepEnd,
    arguments,
    call_step,
    evaluate_when,
)
from reactorflow.runtime.gates.gate_keys import is_place, period_marker, render
from reactorflow.runtime.gates.run_gates import run_needs
from reactorflow.runtime.gates.scope import (
    Entry,
    GateHolds,
    Need,
    enter,
    holder_of,
    keep,
    leave,
)
from reactorflow.status import EventKind

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.storage.contract.storage import Storage


def step_needs(ex: Execution, node: Node, kwargs: dict[str, Any],
               gates: tuple[BoundGate, ...] | None = None) -> list[Need]:
    """The step's gates with their keys built from its arguments (`GateKeyError` if not)."""
    bound = node.spec.gates if gates is None else gates
    return [Need(b.gate, render(b, kwargs, run_id=ex.run_id, step=node.key))  # type: ignore[arg-type]
            for b in bound]


async def call_gated(ex: Execution, node: Node, payload: Any = MISSING, *,
                     check_when: bool = True) -> Outcome:
    """`call_step` under the step's gates (see the module doc); SNOOZED in a worker when a
    gate is busy."""
    key = node.key
    out = Outcome(StepEnd.FAILED)
    try:
        kwargs = await arguments(ex, node, payload)
        if check_when and node.spec.when is not None and not await evaluate_when(ex, node,
                                                                                 kwargs):
            out.status = StepEnd.SKIPPED
            out.events.append(event(EventKind.STEP_SKIPPED, key, detail="when= was false"))
            return out
        needs = step_needs(ex, node, kwargs)
    except ArgumentError as exc:
        out.error = exc
        out.events.append(event(EventKind.STEP_FAILED, key, detail=str(exc)))
        return out
    entry = await enter(ex.gates, needs, ex.step_prefix + key, wait=not ex.mode.in_worker,
                        keep_turn=ex.mode.in_worker, step=key, element=ex.element)
    if entry.period_done is not None:
        out.status = StepEnd.SKIPPED
        out.events.append(event(EventKind.STEP_SKIPPED, key,
                                detail=f"period {entry.period_done.key!r} already used"))
        return out
    if entry.busy is not None:
        out.error = entry.busy
        out.status = StepEnd.SNOOZED if ex.mode.in_worker else StepEnd.FAILED
        out.finished_at = clock.now()
        kind = EventKind.STEP_SNOOZED if ex.mode.in_worker else EventKind.STEP_FAILED
        out.events.append(event(kind, key, detail=summary(entry.busy)))
        return out
    if needs:
        out.events.append(event(EventKind.GATE_ACQUIRED, key, detail=_describe(needs)))
    result: Outcome | None = None
    try:
        result = await call_step(ex, node, payload, check_when=False)
    finally:
        with anyio.CancelScope(shield=True):
            await leave(ex.gates, entry, completed=result is not None
                        and result.status is StepEnd.COMPLETED)
    result.events[:0] = out.events
    return result


async def enter_whole(ex: Execution, node: Node, kwargs: dict[str, Any]) -> Entry:
    """Take a map step's gates for the whole map (its elements run under them); `leave_whole`
    gives them back. `GateKeyError` when a key cannot be built."""
    return await enter(ex.gates, step_needs(ex, node, kwargs), node.key, wait=not ex.mode.parks,
                       keep_turn=ex.mode.parks, step=node.key)


async def leave_whole(ex: Execution, entry: Entry | None, *, completed: bool,
                      parked: bool = False) -> None:
    """Give back a map's gates; a fanned-out map that `parked` keeps them (its places and its
    ordered turn stay taken while its elements run: their jobs renew them, see
    `element_places`; the execution that collects the map takes them again as their holder)."""
    if entry is None:
        return
    if parked:
        keep(ex.gates, entry)
        return
    with anyio.CancelScope(shield=True):
        await leave(ex.gates, entry, completed=completed)


def element_places(storage: Storage, run_id: str, node: Node,
                   kwargs: dict[str, Any]) -> GateHolds | None:
    """The places and turn a parked map keeps, for one of its element jobs to renew (its
    locks and semaphores, its ordered lock's ticket; keys built from the map's arguments as
    the map built them). Each is renewed for its TTL plus `async_wait_timeout` (the longest
    the parked map waits to be looked at: see `gates.parked`), never shorter than the park
    made it. None when the map has none, or a key cannot be built."""
    holds = GateHolds(storage, run_id)
    park = config.settings().async_wait_timeout
    try:
        for bound in node.spec.gates:
            gate = bound.gate
            need = Need(gate, render(bound, kwargs, run_id=run_id, step=node.key))  # type: ignore[arg-type]
            holder = holder_of(holds, need, node.key)
            if isinstance(gate, Lock | Semaphore):
                holds._add(need.key, holder, park + gate.ttl, False)
            elif isinstance(gate, OrderedLock):
                holds.track_ticket(need.key, holder, gate.poison_pill_timeout, True)
    except GateKeyError:
        return None
    return holds if holds.places() or holds.tickets() else None


async def used_period(ex: Execution, node: Node, kwargs: dict[str, Any]) -> Need | None:
    """Before dispatching an async unit: its own period gate already used in this period (the
    unit's worker, or its child run, would find it used and not run; the step is skipped
    instead, as a step gate's used period skips a step). `GateKeyError` when a key cannot be
    built."""
    periods = tuple(b for b in node.spec.gates if b.kind is GateKind.PERIOD)
    for need in step_needs(ex, node, kwargs, periods) if periods else ():
        assert isinstance(need.gate, Period)
        marker, _ = period_marker(need.gate, need.key, clock.now())
        if await ex.storage.period_marked(marker):
            return need
    return None


def _describe(needs: list[Need]) -> str:
    return ", ".join(f"{n.kind.value} {n.key!r}" for n in needs)


@dataclass(frozen=True, slots=True)
class GateWait:
    """A worker's rollback handler whose lock or semaphore is busy, within the time the gate's
    `ttl` allows: the run parks, queued for the place, and the handler runs on a later try."""

    step: str
    busy: GateBusy
    since: float  # when the handler first found its gate busy


async def rollback_places(ex: Execution, node: Node
                          ) -> tuple[Entry | None, Exception | GateWait | None]:
    """Re-take the step's locks and semaphores for its undo or compensate. An undo is never
    lost to contention: it waits for each place as long as the gate's `ttl` allows (at least
    its `wait`), counted from when it first found it busy — in a caller's process, here; in a
    worker, parked (`GateWait`: the run is saved and put back, queued for the place, so the
    worker's thread is free meanwhile). Returns the entry to `leave`, or what keeps the
    handler from running now: a `GateWait`, or an error (`GateBusy` once a gate stayed busy
    that long, `GateKeyError`)."""
    places = tuple(b for b in node.spec.gates if is_place(b))
    if not places:
        return None, None
    try:
        needs = step_needs(ex, node, await arguments(ex, node), places)
    except ArgumentError as exc:
        return None, exc
    scope = f"{ex.step_prefix}{node.key}:rollback"
    if not ex.mode.in_worker:
        entry = await enter(ex.gates, needs, scope, wait=True, step=node.key,
                            element=ex.element, undoing=True)
        return (None, entry.busy) if entry.busy is not None else (entry, None)
    now = clock.now()
    since = ex.state.rollback_waits.get(node.key, now)
    allowed = max(max(b.gate.wait, b.gate.ttl) for b in places
                  if isinstance(b.gate, Lock | Semaphore))
    remaining = since + allowed - now
    entry = await enter(ex.gates, needs, scope, wait=False, step=node.key, element=ex.element,
                        undoing=True, queue_for=max(remaining, 0.0))
    if entry.busy is None:
        return entry, None
    if remaining > 0:
        return None, GateWait(node.key, entry.busy, since)
    return None, entry.busy


async def leave_rollback(ex: Execution, entry: Entry | None) -> None:
    if entry is not None:
        with anyio.CancelScope(shield=True):
            await leave(ex.gates, entry, completed=False)


def deadlock(ex: Execution, node: Node, kwargs: dict[str, Any],
             child_inputs: Any = None) -> GateDeadlock | GateKeyError | None:
    """Before dispatching an async unit: the error if one of its exclusive gates (on the
    decorator, or on the child reactor itself) has a key this run holds."""
    try:
        needs = [n for n in step_needs(ex, node, kwargs) if n.gate.exclusive]
        child = node.spec.child
        if child is not None and child.gates:
            needs += [n for n in run_needs(child, child_inputs, ex.run_id) if n.gate.exclusive]
    except GateKeyError as exc:
        return exc
    for need in needs:
        if ex.gates.holds_exclusively(need.key):
            return GateDeadlock(need.kind.value, need.key, run_id=ex.run_id, step=node.key)
    return None
