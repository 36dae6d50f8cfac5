"""The gates of a run that no execution holds while it is still running: parked (waiting for
its async units, a fanned-out map's elements, a step's next attempt) or handed to a worker.

Such a run has not reached its final state, so it keeps what it holds (a reactor lock is held
until the final state is saved): its own gates, its open composed children's and its parked
maps' places and ordered turns stay taken in storage. Nobody renews them while no process
holds the run, so the protocol is:

1. Before the execution's last write (the park's save), `keep_while_parked` forgets the places
   and turns in the execution (nothing is released) and extends each place to `bound` seconds,
   how long the run may stay parked before somebody looks at it (its unit's wait, the map's
   re-check, the retry's time: see `parking.hold_bound`), plus the place's own `ttl`; each
   turn is stamped.
2. Whoever takes the run on next (a worker woken by a unit or an element, the re-check, the
   sweeper) takes its gates again as their holder: a lock's holder is the run id, a
   semaphore's `<run id>|<scope>`, so storage answers HELD and resets the TTL (the run never
   waits for itself); if it parks again, step 1 extends them again.
3. After a crash (nobody takes the run on), the places lapse `bound + ttl` seconds after the
   park; the run, recovered later, takes them again if they are free or snoozes if another
   run took them meanwhile.
4. A run ended without being driven (`cancel` taking the lock of a parked or paused run) gives
   back, with `release_stopped`, whatever it may still hold: places and its ordered turns.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from reactorflow.definition.gates import GateKind
from reactorflow.errors import ArgumentError, GateKeyError, StorageError
from reactorflow.runtime.engine.stepcall import arguments
from reactorflow.runtime.gates.levels import has_gates, level_needs
from reactorflow.runtime.gates.run_gates import parent_needs, run_needs
from reactorflow.runtime.gates.scope import Need, extend_kept, holder_of, keep
from reactorflow.runtime.gates.step_gates import step_needs
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from reactorflow.runtime.engine.execution import Execution

log = logging.getLogger("reactorflow.gate")


async def keep_while_parked(ex: Execution, bound: float) -> None:
    """Step 1: keep the run's places and turns in storage for `bound` seconds plus their TTL
    (the caller's next write is the execution's last)."""
    holds = ex.gates
    if ex.run_entry is not None:
        keep(holds, ex.run_entry)
        ex.run_entry = None
    for entry in ex.level_entries.values():
        keep(holds, entry)
    ex.level_entries.clear()
    if holds.kept or holds.kept_tickets:
        await extend_kept(holds, bound)


async def release_stopped(ex: Execution) -> None:
    """Step 4: give back everything the run may hold in storage (never fails: what is left
    lapses after its TTL)."""
    storage = ex.storage
    holds = ex.gates
    scoped: list[tuple[Need, str]] = []
    with contextlib.suppress(GateKeyError):  # a key that could not be built was never taken
        scoped += [(need, "") for need in [*parent_needs(ex),
                                           *run_needs(ex.plan.reactor, ex.level_inputs[""],
                                                      ex.run_id)]]
    for key, node in ex.plan.nodes.items():
        record = ex.records.get(key)
        if record is None or record.status != StepStatus.RUNNING:
            continue
        try:
            if node.spec.map is not None and node.spec.gates:
                needs = step_needs(ex, node, await arguments(ex, node))
            elif record.child_started and has_gates(node):
                needs = level_needs(ex, node, await arguments(ex, node), ex.level_inputs[key])
            else:
                continue
        except (ArgumentError, GateKeyError, StorageError):
            continue  # (the keys could not be rebuilt: what it holds lapses after its TTL)
        scoped += [(need, key) for need in needs]
    try:
        for need, scope in scoped:
            holder = holder_of(holds, need, scope)
            if need.kind in (GateKind.LOCK, GateKind.SEMAPHORE):
                await storage.gate_release(need.key, holder)
            elif need.kind is GateKind.ORDERED_LOCK:
                await storage.ordered_leave(need.key, holder)
    except Exception:
        log.warning("reactorflow.gate.release_failed run_id=%s", ex.run_id, exc_info=True)
