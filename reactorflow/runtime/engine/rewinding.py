"""The end of a rewind's rollback (api.md §15): the steps it undid run again.

A rewind (`runtime.ops.rewind`) saves the run `rolling_back` with trigger `REWIND` and its
plan (`RunState.rewind`: the step it goes back to, the steps it undoes, the changed inputs);
the rollback then undoes those steps only, newest first (`rollback.plan_rollback`). When it
has (`finish_rewind`), in order, each write idempotent so that a crash anywhere is resumed by
the sweeper to the same end (the run is still `rolling_back` with its plan until step 4):

1. A rollback handler that failed leaves the run `held` with `RewindUndoFailed` (its effects
   may persist: running the steps again could repeat them); an operator undoes or cancels it.
2. The changed inputs, if any, are written into the run's meta (`Storage.migrate_run`).
3. The claims and payload counters of the interrupts among the steps are removed: each waits
   again for a new payload; the element slots of the maps among them are removed (and the locks
   a fanned-out map's element jobs left to expire, released): each map runs again from nothing
   (an async reactor's step starts a new child run, `child_run_id`).
4. One write: the steps' records (and their composed children's) pending again, each step's
   rewind count one more (its `ctx.idempotency_key` is new), status `running`, event
   `run.rewound`. The drive then goes forward from there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from reactorflow import records
from reactorflow.definition.graph import SEP
from reactorflow.definition.specs import StepKind
from reactorflow.errors import MigrationError
from reactorflow.protection import fields, sealing
from reactorflow.records import NIL, RollbackFailure, RunError, StepRecord
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.map_slot_keys import ARGS, element_lock, job_key, slot_keys
from reactorflow.status import EventKind, Status, StepStatus

if TYPE_CHECKING:
    from reactorflow.runtime.engine.execution import Execution

log = logging.getLogger("reactorflow.run")


async def finish_rewind(ex: Execution, failures: list[RollbackFailure]) -> None:
    """Steps 1-4 of the module, once the rewind's rollback is done."""
    plan = ex.state.rewind
    assert plan is not None
    if failures:
        first = failures[0]
        error = RunError(first.step, "RewindUndoFailed",
                         f"the rewind to {plan.to!r} could not undo {first.step!r} "
                         f"({first.kind} raised {first.type}: {first.message}); its steps did not "
                         "run again",
                         rollback_failures=failures)
        await ex.writer.save_state(Status.HELD, final=True, publish=True, error=error,
                                   rewind=None, rollback_trigger=None,
                                   events=[event(EventKind.RUN_HELD, first.step,
                                                 detail=error.message)])
        return
    if plan.inputs != NIL:
        await _write_inputs(ex, plan.inputs)
    keys = rewound_keys(ex, plan.steps)
    waiting = [key for key in keys if ex.plan.nodes[key].kind is StepKind.INTERRUPT]
    await ex.storage.forget_claims(ex.run_id, ex.owner, waiting)
    maps = [key for key in keys if ex.plan.nodes[key].kind is StepKind.MAP]
    for key in maps:
        await _free_element_locks(ex, key)
    await ex.storage.clear_elements(ex.run_id, ex.owner,
                                    [slot for key in maps for slot in slot_keys(key)])
    ex.map_lists = {read: items for read, items in ex.map_lists.items() if read[0] not in maps}
    for key in keys:
        ex.records[key] = StepRecord(StepStatus.PENDING, 0)
        ex.values.pop(key, None)
        ex.claims.pop(key, None)
        ex.level_inputs.pop(key, None)
    counts = dict(ex.state.rewinds)
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    await ex.writer.save_state(Status.RUNNING, steps=keys, rewind=None, rollback_trigger=None,
                               rewinds=counts, error=None, cancel_reason=None,
                               halt_reason=None, waiting_on=[], deadlines={}, timeout_at=None,
                               events=[event(EventKind.RUN_REWOUND, plan.to,
                                             detail=", ".join(plan.steps))])
    log.info("reactorflow.run.rewound run_id=%s reactor=%s to=%s steps=%s", ex.run_id,
             ex.reactor, plan.to, ",".join(plan.steps))


async def _free_element_locks(ex: Execution, key: str) -> None:
    """The locks a fanned-out map's element jobs left to expire (their outcomes guarded the
    elements; the rewind's rollback settled and undid every one, so no job holds them any
    more): released, so that the map's elements run again at once."""
    raw = (await ex.storage.load_elements(ex.run_id, job_key(key), ARGS, 1))[0]
    if raw is None:  # an inline map, or one that never fanned out
        return
    for index in range(records.decode_element_args(raw).count):
        lock = element_lock(ex.run_id, key, index)
        holder = await ex.storage.lock_owner(lock)
        while holder is not None and await ex.storage.release_lock(lock, holder) > 0:
            pass  # (a re-entered hold: leave every count)


def rewound_keys(ex: Execution, steps: list[str]) -> list[str]:
    """The keys whose records a rewind of `steps` (root keys) resets: those steps, and the
    steps of the composed children among them."""
    keys: list[str] = []
    for key in steps:
        keys.append(key)
        prefix = key + SEP
        keys += [k for k in ex.plan.nodes if k.startswith(prefix)]
    return keys


async def _write_inputs(ex: Execution, inputs: msgspec.Raw) -> None:
    """Step 2: the rewind's inputs into the run's meta, and into this execution."""
    stored = await ex.storage.load_head(ex.run_id)
    assert stored is not None  # (held under its lock)
    meta = msgspec.structs.replace(ex.meta, inputs=inputs)
    if not await ex.storage.migrate_run(ex.run_id, ex.owner, expected_meta=stored.meta,
                                        meta=records.encode(meta),
                                        state=records.encode(sealing.state(ex.keys, ex.state)),
                                        steps={},
                                        removed=[]):
        raise MigrationError(ex.run_id, ex.reactor, meta.version, meta.version,
                             ["the run's meta changed while it was rewound"])
    ex.meta = meta
    ex.level_inputs[""] = ex.plan.levels[""].inputs_decoder.decode(
        ex.keys.open(fields.INPUTS, inputs))
