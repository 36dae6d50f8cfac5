"""An interrupt's deadline come due: the run fails (`InterruptExpired`), or, with the
interrupt's `on_timeout=`, resumes with that payload exactly once, as if `continue_` had
delivered it (api.md §12).

`deadline_due` is the one entry: whoever notices a deadline calls it (the timer firer, the
sweeper, the test kit through the sweeper), any number of times, from any number of tasks and
processes. The protocol, for a run of `reactor` (each pass of step 1 to 5 settles one
interrupt; the passes repeat while the run is paused with another one due):

1. Read the run's head. Not a run of `reactor`, or not `paused` (a run still `running`
   while it waits is settled once it pauses, when its deadline is still passed): nothing to
   do (None).
2. The due interrupts: those it waits on whose deadline (`RunState.deadlines`) is at or
   before now and that have no claim (a claimed payload was accepted: whoever holds or
   recovers the run applies it). None: nothing to do. A run of another graph:
   `DefinitionChanged`. Else the earliest (by deadline, then key) is settled.
3. Without `on_timeout`: roll the run back to `failed` with `run.error.type ==
   "InterruptExpired"` (`resume.fail_run`; a run another execution holds is left a request
   that it fails at its next step boundary). No claim is needed: after the deadline
   `continue_` accepts no payload for that interrupt (storage's `ResumeCheck` and
   `resume._checked` refuse it).
4. With `on_timeout`: the payload, the declared value or the callable's (given the
   interrupt's other arguments resolved from the run as its body would get them, read from
   storage), conformed to the interrupt's schema and encoded, in the caller.
   - It conforms: claim it with `Storage.claim_and_lock` (first wins, atomic with the status
     check; the `running` write made in the same call when the run is still as read in 1).
     Not accepted (`continue_` or another caller claimed it first; the run ended): nothing
     to do (None). Accepted: from here on exactly as `continue_` (`resume.after_claim`):
     drive the run in the caller, hand the remainder to a worker (`resume="background"`, or
     `hand_off`), or, when another execution holds the run, leave the claim to it.
   - It does not conform (or the callable raised): take the run's lock (waiting up to
     `lock_wait`; not taken: nothing to do, a later call or sweep tries again), and under it
     check 1 and 2 again, claim the interrupt (a token that is never applied: a racing
     `continue_` then gets `AlreadyResumed`, never an acceptance the rollback would void),
     and roll the run back to `failed` with `PayloadValidationError` (or `ArgumentError`)
     naming the interrupt.
5. Return the run as this call left it.

With `on_timeout`, `continue_` after the deadline is still accepted until something claims
the interrupt (it never raises `InterruptExpired`), so the two race only on the claim.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING

from reactorflow import clock, config, records
from reactorflow.definition.conformance import Rejected, conform
from reactorflow.definition.graph import Node, Plan, compare_fingerprints, plan_for, waiting_label
from reactorflow.definition.specs import OnTimeout
from reactorflow.errors import ArgumentError, DefinitionChanged
from reactorflow.protection import fields
from reactorflow.protection.resolve import run_keys
from reactorflow.records import RunError, RunState, summary
from reactorflow.runtime.engine.mode import CALLER, DriveMode
from reactorflow.runtime.engine.ownership import acquire, keep_alive, new_owner
from reactorflow.runtime.engine.stepcall import arguments
from reactorflow.runtime.ops import migrating, operations
from reactorflow.runtime.ops.payloads import interrupt_node
from reactorflow.runtime.ops.resume import after_claim, fail_run, resumption, roll_back
from reactorflow.runtime.ops.snapshots import read_head
from reactorflow.snapshot import Run
from reactorflow.status import Status
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ClaimResult

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.deadline")

TIMER_CLAIM = records.encode(None)
"""What claims an interrupt whose `on_timeout` gave no valid payload, under the run's lock,
just before the run is rolled back: the claim only keeps a racing `continue_` from being
accepted; it is never applied."""


async def deadline_due(reactor: Reactor, storage: Storage, run_id: str, *,
                       hand_off: bool = False, mode: DriveMode = CALLER) -> Run | None:
    """Settle the interrupts of run `run_id` whose deadline passed (see the module for the
    protocol): fail the run (`InterruptExpired`), or resume each with its `on_timeout`
    payload, exactly once however many callers race, and whatever `continue_` races them.

    Safe to call at any time, any number of times: a run that is not paused, has no
    interrupt overdue, or whose overdue interrupts are claimed already is left as it is.

    Args:
        reactor: The run's reactor.
        storage: The storage holding the run.
        run_id: The run.
        hand_off: Hand a resumed run's remainder to a worker whatever the interrupt's
            `resume=` (e.g. from a sweeper with a shared queue); else `resume=` decides, as
            for `continue_`.
        mode: How a resumed run driven here waits (`engine.mode`): `CALLER` (the default, as
            `continue_` drives it), `WORKER` from a worker's job (a step waiting for an async
            unit parks the run instead of holding the worker).

    Returns:
        The run as this call left it when it failed or resumed it (`failed`; resumed and
        driven on, or `running` when handed to a worker or applied by the execution that
        holds it); None when there was nothing to do or another caller did it first.

    Raises:
        DefinitionChanged: The run was made by a graph the reactor's changed incompatibly.
        CorruptRecord: The run's record cannot be read.
        StorageError: The storage failed.
    """
    head = await storage.load_head(run_id)
    if head is None or head.reactor != reactor.name:
        return None
    reactor = await migrating.own_reactor(reactor, run_id, head.meta)
    plan = plan_for(reactor)
    settled: Run | None = None
    for _ in range(len(plan.nodes)):  # each pass claims another interrupt or fails the run
        run = await _settle_earliest(reactor, plan, storage, run_id, hand_off, mode)
        if run is None:
            break
        settled = run
        if run.status is not Status.PAUSED:
            break
    return settled


def due_interrupts(state: RunState, claims: dict[str, bytes], now: float) -> list[str]:
    """The interrupts the run waits on whose deadline is at or before `now` and that have no
    claim, earliest deadline first (then by key)."""
    due = sorted((deadline, key) for key in state.waiting_on
                 if (deadline := state.deadlines.get(key)) is not None and deadline <= now
                 and key not in claims)
    return [key for _, key in due]


async def _settle_earliest(reactor: Reactor, plan: Plan, storage: Storage, run_id: str,
                           hand_off: bool, mode: DriveMode) -> Run | None:
    """One pass of the protocol (steps 1 to 5 of the module)."""
    head = await storage.load_head(run_id)
    if head is None or head.reactor != reactor.name or head.status != Status.PAUSED:
        return None
    _, meta, state = read_head(head)
    due = due_interrupts(state, await storage.claims(run_id), clock.now())
    if not due:
        return None
    differences = compare_fingerprints(meta.fingerprint, plan.fingerprint)
    if differences:  # (only once something is due: a paused run of another graph may wait)
        raise DefinitionChanged(run_id, reactor.name, differences, version=meta.version)
    node = interrupt_node(plan, due[0])
    if node is None:
        return None
    key = node.key
    options = node.spec.interrupt
    assert options is not None
    if options.on_timeout is None:
        error = RunError(key, "InterruptExpired",
                         f"no payload for interrupt {waiting_label(key)!r} before its deadline")
        if not await fail_run(reactor, storage, run_id, error):
            return None
        log.info("reactorflow.deadline.expired run_id=%s step=%s", run_id, key)
        return await operations.get(reactor, run_id)
    payload = await _timeout_payload(reactor, plan, storage, run_id, node, options.on_timeout)
    if payload is None:
        return None  # the run is gone
    if isinstance(payload, RunError):
        if not await _fail_claiming(reactor, storage, run_id, key, payload):
            return None
        log.info("reactorflow.deadline.invalid_payload run_id=%s step=%s error=%s", run_id,
                 key, payload.type)
        return await operations.get(reactor, run_id)
    owner = new_owner()
    keys = await run_keys(storage, None, run_id)
    outcome, stored = await storage.claim_and_lock(
        run_id, key, keys.seal(fields.claim(key), payload), owner=owner,
        lock_ttl=config.settings().lock_ttl,
        then=resumption(plan, head, state, key, actor=""))  # (the engine's own: no actor)
    if outcome is not ClaimResult.ACCEPTED:
        return None  # `continue_` or another caller won; or the run ended meanwhile
    log.info("reactorflow.deadline.resumed run_id=%s step=%s", run_id, key)
    return await after_claim(reactor, plan, storage, run_id, key, owner, outcome, stored,
                             hand_off=hand_off, mode=mode, keys=keys)


async def _timeout_payload(reactor: Reactor, plan: Plan, storage: Storage, run_id: str,
                           node: Node, on_timeout: OnTimeout) -> bytes | RunError | None:
    """The `on_timeout` payload conformed to the interrupt's schema and encoded; or the error
    the run fails with: the callable raised (or its arguments cannot be resolved), or its
    value does not conform; None when the run is gone."""
    options = node.spec.interrupt
    assert options is not None
    label = waiting_label(node.key)
    value = on_timeout.payload
    if on_timeout.compute is not None:
        stored = await storage.load_run(run_id)
        if stored is None:
            return None
        ex = await operations.owned_execution(reactor, storage, stored, new_owner(),
                                              check_graph=False, plan=plan)  # read only
        try:
            kwargs = await arguments(ex, node)
            value = on_timeout.compute(**{name: kwargs[name] for name in on_timeout.names})
            if inspect.isawaitable(value):
                value = await value
        except ArgumentError as exc:
            return RunError(node.key, "ArgumentError", f"interrupt {label!r}: on_timeout= "
                            f"cannot be given its arguments: {exc.message}")
        except Exception as exc:
            return RunError(node.key, "ArgumentError",
                            f"interrupt {label!r}: its on_timeout= raised {summary(exc)}")
    try:
        return records.encode(conform(value, options.payload_type))
    except Rejected as exc:
        return RunError(node.key, "PayloadValidationError",
                        f"interrupt {label!r}: its on_timeout= gave a payload that does not "
                        f"match its schema: {exc.field}: {exc.reason}")


async def _fail_claiming(reactor: Reactor, storage: Storage, run_id: str, key: str,
                         error: RunError) -> bool:
    """Under the run's lock: if interrupt `key` is still due and unclaimed, claim it
    (`TIMER_CLAIM`) and roll the run back to `failed` with `error`. Whether it did."""
    settings = config.settings()
    owner = new_owner()
    if not await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait):
        log.info("reactorflow.deadline.busy run_id=%s step=%s: left for a later pass", run_id,
                 key)
        return False
    async with keep_alive(storage, run_id, owner, settings.lock_ttl) as hold:
        ex = await operations.load_owned(reactor, storage, run_id, owner)
        ex.lease = hold
        if (ex.state.status != Status.PAUSED
                or key not in due_interrupts(ex.state, ex.claims, clock.now())):
            return False
        if await storage.claim(run_id, key, TIMER_CLAIM) is not ClaimResult.ACCEPTED:
            return False
        await roll_back(ex, error)
    return True
