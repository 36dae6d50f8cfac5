"""A reactor's own gates, held by its run.

The protocol:

1. `run()` and `dispatch()` take the reactor's gates in the caller before anything is stored
   (`at_start`), waiting up to each gate's `wait`; a busy gate raises `rf.GateBusy` and nothing
   is stored (an idempotency claim taken for the start is given back). A caller waiting for
   the last gate queues with its encoded run, which the release that hands it the place
   stores (`scope.enter`'s `creates`; where storage cannot, the caller stores it after); a
   start cancelled as that happened ends the stored run `aborted`. A dispatched run's
   places are handed to its worker (the worker's execution takes them again as their holder:
   re-entered, its TTL renewed; a rate limit's charge is remembered); until then they live
   their TTL. A reactor with an `OrderedLock` is the exception for `dispatch()`: the caller
   only takes the run's place in line (call order is line order), never raises `GateBusy`,
   and the worker takes the other gates in the run's turn (taking them before it could keep
   a predecessor from its own).
2. Every execution of the run (`driver.drive`) holds them while it drives: `admit` takes what
   the execution does not hold yet (a worker never waits: a busy gate snoozes the run; a caller
   waits, then hands the run to a worker). Periods are checked and rate limits charged only
   before the run's first step (a charge is also remembered by storage, so a redelivery is not
   charged again).
3. When the execution lets go of the run (`release`): places are given back when it is
   paused or snoozed (it holds nothing then); a run parked or handed to a worker is still
   running and keeps them (`gates.parked`: they are forgotten here, released by nobody, and
   extended for the park); its ordered turn passes on at a final status only; periods are
   recorded when it completed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from reactorflow.definition import registry
from reactorflow.definition.gates import GateKind
from reactorflow.definition.graph import plan_for
from reactorflow.errors import GateBusy, GateKeyError
from reactorflow.runtime.engine.stepcall import read_input
from reactorflow.runtime.gates.gate_keys import render
from reactorflow.runtime.gates.scope import Entry, GateHolds, Need, enter, holder_of, leave
from reactorflow.status import Status
from reactorflow.storage.contract.values import RunCreation

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.definition.table import Declared
    from reactorflow.runtime.engine.execution import Execution


class Admission(StrEnum):
    """Whether an execution may drive its run (see `admit`)."""

    ADMITTED = "admitted"
    BUSY = "busy"  # a gate is busy: the run waits (snoozed, or handed to a worker)
    PERIOD = "period"  # a period gate was used already: the run ends halted
    BAD_KEY = "bad_key"  # a key could not be built: the run fails


def run_needs(reactor: Declared, inputs: Any, run_id: str) -> list[Need]:
    """The reactor's gates with their keys built from the run's inputs.

    Raises:
        GateKeyError: a key could not be built.
    """
    values = {name: read_input(inputs, name) for name in reactor.input_names}
    return [Need(b.gate, render(b, values, run_id=run_id)) for b in reactor.gates]  # type: ignore[arg-type]


def parent_needs(ex: Execution) -> list[Need]:
    """A child run of an async_reactor step: the step's own gates, with the keys its parent
    built from the step's arguments (`RunMeta.parent_gates`); the child holds them as its own
    (held while it runs, released at its final state).

    Raises:
        GateKeyError: the parent's reactor or step is not declared here as it was.
    """
    meta = ex.meta
    if not meta.parent_gates:
        return []
    parent = registry.lookup(meta.parent_reactor or "")
    node = None if parent is None else plan_for(parent).nodes.get(meta.parent_step or "")
    gates = () if node is None else node.spec.gates
    if len(gates) != len(meta.parent_gates):
        raise GateKeyError("gate", f"{meta.parent_reactor}.{meta.parent_step}",
                           "cannot be matched: the async_reactor step that started this run is "
                           "not declared here as it was (deploy the same code everywhere)",
                           run_id=ex.run_id)
    return [Need(bound.gate, key)  # type: ignore[arg-type]
            for bound, key in zip(gates, meta.parent_gates, strict=True)]


async def at_start(holds: GateHolds, reactor: Reactor, inputs: Any, *,
                   dispatch: bool, creates: RunCreation | None = None) -> Entry | None:
    """Step 1 of the protocol, for a run about to be stored (`creates`: the run, which a
    hand-over of its last gate may store: see `scope.enter`).

    Raises:
        GateBusy: a gate stayed busy past its `wait` (everything taken was given back).
        GateKeyError: a key could not be built.
    """
    if not reactor.gates:
        return None
    needs = run_needs(reactor, inputs, holds.run_id)
    if dispatch and any(need.kind is GateKind.ORDERED_LOCK for need in needs):
        for need in needs:
            if need.kind is GateKind.ORDERED_LOCK:
                await holds.storage.ordered_enter(need.key, holder_of(holds, need, ""))
        return None
    entry = await enter(holds, needs, "", wait=True, creates=creates)
    if entry.busy is not None:
        raise entry.busy
    return entry


async def abandon(holds: GateHolds, entry: Entry | None) -> None:
    """Give back everything a start took when its run was not stored after all."""
    if entry is not None:
        await leave(holds, entry, completed=False)


async def admit(ex: Execution) -> tuple[Admission, Exception | None]:
    """Step 2 of the protocol: the run's gates for this execution (see the module doc)."""
    reactor = ex.plan.reactor
    if not reactor.gates and not ex.meta.parent_gates:
        return Admission.ADMITTED, None
    entry = ex.run_entry
    if entry is None:
        first = not ex.records and ex.state.status == Status.RUNNING
        try:
            needs = [*parent_needs(ex), *run_needs(reactor, ex.level_inputs[""], ex.run_id)]
        except GateKeyError as exc:
            return Admission.BAD_KEY, exc
        entry = await enter(ex.gates, needs, "", wait=not ex.mode.in_worker, keep_turn=True,
                            charge_rate=first, check_period=first)
        ex.run_entry = entry
    if entry.period_done is not None:
        return Admission.PERIOD, None
    if entry.busy is not None:
        busy: GateBusy = entry.busy
        return Admission.BUSY, busy
    return Admission.ADMITTED, None


async def release(ex: Execution) -> None:
    """Step 3 of the protocol, once the execution's last write is done."""
    entry = ex.run_entry
    if entry is None:
        return
    ex.run_entry = None
    status = Status(ex.state.status)
    await leave(ex.gates, entry, completed=status is Status.COMPLETED,
                keep_turn=not status.is_terminal)
