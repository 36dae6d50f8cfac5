"""Delivering an interrupt's payload: validate, claim (first wins), then resume.

The protocol (the same for an interrupt nested in a composed child, named by its path):

1. Conform the payload to the interrupt's schema, in the caller (no storage involved).
2. If it conforms: check, claim, lock and mark the run `running` in one storage call
   (`Storage.claim_and_lock` with a `ResumeCheck`; one round trip on Redis): the run must be a
   run of this reactor, `paused` or `running`, of the same graph, waiting on the interrupt and
   not past its deadline, and, for a process holding no codec, its inputs not sealed (a clear
   payload is never stored beside sealed values); then the claim (first wins, atomic with a
   status check), the run's lock, and, for a paused reactor without gates whose other
   interrupts are unclaimed, the `running` write `driver.drive` would start with; then the run
   is read under the lock.
   Refused by the check, nothing was written, and the run's head as storage saw it goes to 3.
3. Otherwise (a payload that does not conform, a step that is no interrupt, a refused check),
   the checks again in the caller on the run's head, each refusal its error (and, holding no
   codec, `KeyUnavailable` for sealed inputs, before the payload is validated): `RunNotFound`,
   `NotPaused`, `AlreadyResumed`, `DefinitionChanged`, `InterruptNotPending`,
   `InterruptExpired` (the run is rolled back to `failed` first; never for an interrupt with
   `on_timeout=`: past its deadline a payload is still accepted until something claims the
   interrupt, `continue_` or the deadline's own claim, `deadlines.deadline_due`, whichever
   comes first; storage's check refuses it, so it is claimed here). An invalid payload then
   counts one attempt in the interrupt's own counter and changes nothing else; the attempt
   that reaches `max_attempts` rolls the whole run back (from the root) to `failed`. A check
   that passes here (a compatible change of the graph) claims and locks as in 2, with the
   `running` write made only if the run is still as read here (a `Resumption`).
4. The owner applies every claim and drives the run. If another execution holds the run,
   return at once with status `running`: that execution applies the claim once it is free
   (see `operations.run_owned`), so an accepted payload is never stranded.

Who gave the payload (api.md §16, `audit.who()`) is on exactly one event, written in the
claim's own storage call: `run.resumed` when that call makes the `running` write; else (another
execution holds the run, it was running already, gates come first, or it changed since read)
`interrupt.accepted` for the interrupt, appended with the claim (`claim_and_lock`'s `events`).
The `run.resumed` a later drive writes when it applies the claim names nobody.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from reactorflow import audit, clock, config, records
from reactorflow.definition.conformance import Rejected, conform
from reactorflow.definition.graph import (
    Node,
    Plan,
    compare_fingerprints,
    plan_for,
    waiting_label,
)
from reactorflow.definition.specs import StepKind
from reactorflow.errors import (
    AlreadyResumed,
    CorruptRecord,
    DefinitionChanged,
    InterruptExpired,
    InterruptNotPending,
    KeyUnavailable,
    NotPaused,
    PayloadValidationError,
    RunNotFound,
    RunStateError,
)
from reactorflow.protection import envelope, fields, sealing
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import plain_keys, run_keys
from reactorflow.records import Control, RunError, RunState
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.driver import drive
from reactorflow.runtime.engine.execution import Execution, event, verify_stored
from reactorflow.runtime.engine.mode import CALLER, WAITS_FOR_THROWS, DriveMode
from reactorflow.runtime.engine.ownership import acquire, keep_alive, new_owner
from reactorflow.runtime.gates.levels import has_gates
from reactorflow.runtime.ops import migrating, operations
from reactorflow.runtime.ops.payloads import checked_payload, interrupt_node, step_key
from reactorflow.runtime.ops.snapshots import read_head
from reactorflow.runtime.subjects.data_keys import subjectless
from reactorflow.snapshot import Run
from reactorflow.status import ControlKind, EventKind, RollbackTrigger, Status
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import (
    ClaimResult,
    ResumeCheck,
    Resumption,
    RunHead,
    StoredRun,
)

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

log = logging.getLogger("reactorflow.resume")


def counter_name(key: str) -> str:
    return f"payload_attempts:{key}"


async def continue_by_correlation(reactor: Reactor, correlation_id: str, *,
                                  step: str | Sequence[str], payload: Any) -> Run:
    run_id = await config.current_storage().resolve_correlation(reactor.name, correlation_id)
    if run_id is None:
        raise RunNotFound(correlation_id, reactor.name, correlation_id=correlation_id)
    return await continue_run(reactor, run_id, step=step, payload=payload)


async def continue_run(reactor: Reactor, run_id: str, *, step: str | Sequence[str],
                       payload: Any) -> Run:
    storage = config.current_storage()
    plan = plan_for(reactor)
    key = step_key(step)
    owner = new_owner()
    lock_ttl = config.settings().lock_ttl
    # (a reactor none of whose versions declares a subject stores runs without one: no read)
    keys = plain_keys(run_id) if subjectless(reactor.name) else \
        await run_keys(storage, None, run_id)
    if keys.seals:  # its values are opened before the claim is written (a corrupt one: none)
        found_run = await storage.load_run(run_id, claims=True)
        if found_run is not None and found_run.head.reactor == reactor.name:
            verify_stored(keys, found_run)
    encoded = _conformed(plan, key, payload)
    if encoded is not None:
        # checks, claim, lock and the `running` write in one call
        encoded = keys.seal(fields.claim(key), encoded)
        outcome, stored = await storage.claim_and_lock(run_id, key, encoded, owner=owner,
                                                       lock_ttl=lock_ttl,
                                                       check=_check(reactor, plan, key,
                                                                    clear=not keys.seals),
                                                       events=_accepted_events(key))
        if outcome is not ClaimResult.REFUSED:
            return await after_claim(reactor, plan, storage, run_id, key, owner, outcome, stored,
                                     keys=keys)
        found = stored.head if stored is not None else None  # refused: say why from it
    else:
        found = await storage.load_head(run_id)
    head = operations.own_head(reactor, run_id, found)
    own = await migrating.own_reactor(reactor, run_id, head.meta)
    if own is not reactor or records.meta_version(head.meta) != own.version:
        # a run of another version (or just migrated): its own version's reactor continues it
        return await continue_run(own, run_id, step=step, payload=payload)
    node, state = await _checked(reactor, storage, plan, run_id, key, head, keys)
    if encoded is None:
        encoded = keys.seal(fields.claim(key),
                            await _validated(reactor, storage, run_id, node, payload))
    outcome, stored = await storage.claim_and_lock(run_id, key, encoded, owner=owner,
                                                   lock_ttl=lock_ttl,
                                                   then=resumption(plan, head, state, key,
                                                                  actor=audit.who()),
                                                   events=_accepted_events(key))
    return await after_claim(reactor, plan, storage, run_id, key, owner, outcome, stored,
                             keys=keys)


async def check_continue(reactor: Reactor, run_id: str, *, step: str | Sequence[str],
                         payload: Any) -> Any:
    """Check what `continue_run` would, and write nothing: the run is a run of `reactor`,
    paused or running, of the same graph, waiting on interrupt `step` before its deadline, and
    the payload conforms to its schema. A refused payload counts no attempt.

    Returns:
        The payload converted to the interrupt's schema.

    Raises:
        RunNotFound, NotPaused, AlreadyResumed, DefinitionChanged, InterruptNotPending,
        InterruptExpired (`rolled_back` False): as `continue_` would, without failing the run.
        PayloadValidationError: the payload does not conform (`counted` False).
        KeyUnavailable: this process holds no codec and the run's values are sealed (as
            `continue_run` refuses to store a clear payload beside them).
    """
    storage = config.current_storage()
    key = step_key(step)
    head = operations.own_head(reactor, run_id, await storage.load_head(run_id))
    reactor = await migrating.own_reactor(reactor, run_id, head.meta, migrate_now=False)
    plan = plan_for(reactor)
    node, _ = await _checked(reactor, storage, plan, run_id, key, head, plain_keys(run_id),
                             expire=False)
    return checked_payload(node, payload, run_id=run_id, reactor=reactor.name)


async def _checked(reactor: Reactor, storage: Storage, plan: Plan, run_id: str, key: str,
                   head: RunHead, keys: RunKeys, *,
                   expire: bool = True) -> tuple[Node, RunState]:
    """The checks before anything is claimed, on the run as `head` shows it: the interrupt's
    node and the run's state when they pass; else the refusal (`NotPaused`, `AlreadyResumed`,
    `DefinitionChanged`, `InterruptNotPending`, `InterruptExpired`, after failing the run unless
    `expire` is False: a check writes nothing; last, for `keys` that seal nothing,
    `KeyUnavailable` when the run's inputs are sealed: a clear payload is never stored beside
    sealed values)."""
    status, meta, state = read_head(head)
    if status not in (Status.PAUSED, Status.RUNNING):
        await _refuse_ended(storage, run_id, key, status, state)
    if status is Status.PAUSED and state.paused_by is not None:
        raise RunStateError(run_id, status, "continue", hint=(
            f"An operator paused it ({state.paused_by.by}): it waits for resume(run_id), not "
            "for a payload. Once resumed, an interrupt it reaches waits again and continue_ "
            "delivers its payload."))
    differences = compare_fingerprints(meta.fingerprint, plan.fingerprint)
    if differences:  # before anything is claimed or counted
        raise DefinitionChanged(run_id, reactor.name, differences, version=meta.version)
    node = plan.nodes.get(key)
    if key not in state.waiting_on or node is None or node.kind is not StepKind.INTERRUPT:
        if node is not None and key in await storage.claims(run_id):
            raise AlreadyResumed(run_id, waiting_label(key))
        raise InterruptNotPending(run_id, waiting_label(key),
                                  [waiting_label(k) for k in state.waiting_on])
    deadline = state.deadlines.get(key)
    options = node.spec.interrupt
    assert options is not None
    if deadline is not None and clock.now() >= deadline and options.on_timeout is None:
        if expire:
            error = RunError(key, "InterruptExpired",
                             f"no payload for interrupt {waiting_label(key)!r} before its "
                             "deadline")
            await fail_run(reactor, storage, run_id, error)
        raise InterruptExpired(run_id, waiting_label(key), deadline, rolled_back=expire)
    if not keys.seals:
        keys.open(fields.INPUTS, meta.inputs)
    return node, state


async def _refuse_ended(storage: Storage, run_id: str, key: str, status: str,
                        state: RunState) -> NoReturn:
    """The refusal of a payload for a run no longer paused or running: `AlreadyResumed` when
    that interrupt has a claim; `InterruptExpired` when the run was failed because that
    interrupt expired (by a sweep, the test kit's clock, or an earlier `continue_`), also while
    that rollback is under way; else `NotPaused`."""
    if key in await storage.claims(run_id):
        raise AlreadyResumed(run_id, waiting_label(key))
    error = state.error
    if error is not None and error.type == "InterruptExpired" and error.step == key:
        stored = await storage.load_run(run_id)
        raw = stored.steps.get(key) if stored is not None else None
        deadline = records.decode_step(raw).deadline if raw is not None else None
        raise InterruptExpired(run_id, waiting_label(key),
                               deadline if deadline is not None else state.updated_at)
    raise NotPaused(run_id, status)


async def after_claim(reactor: Reactor, plan: Plan, storage: Storage, run_id: str, key: str,
                      owner: str, outcome: ClaimResult, stored: StoredRun | None, *,
                      hand_off: bool = False, mode: DriveMode = CALLER,
                      keys: RunKeys | None = None) -> Run:
    """After `claim_and_lock`: refuse a claim not accepted; else drive the run (as `stored`,
    read under the lock; waiting as `mode` says), hand it to a worker (`resume="background"`,
    or `hand_off`), or, when another execution holds it, return it as accepted."""
    if outcome is ClaimResult.TAKEN:
        raise AlreadyResumed(run_id, waiting_label(key))
    if outcome is ClaimResult.NOT_RESUMABLE:
        current = await storage.load_head(run_id)
        if current is None:
            raise NotPaused(run_id, "gone")
        status, _, state = read_head(current)
        await _refuse_ended(storage, run_id, key, status, state)
    log.info("reactorflow.resume.accepted run_id=%s step=%s", run_id, key)
    options = plan.nodes[key].spec.interrupt
    assert options is not None
    if stored is None:
        # Another execution holds the run: it applies the claim once free, and a worker is
        # asked too (it waits for the lock; a duplicate finds nothing left to apply).
        log.info("reactorflow.resume.deferred run_id=%s step=%s reason=run_busy", run_id, key)
        queue.enqueue_run(run_id, reactor.name, version=reactor.version)
        claimed = set(await storage.claims(run_id)) | {key}
        return accepted(await operations.get(reactor, run_id), claimed)
    # (the graph was checked before the claim: by storage's check, or by `_checked`)
    try:
        ex = await operations.owned_execution(reactor, storage, stored, owner, check_graph=False,
                                              plan=plan, keys=keys)
    except (KeyUnavailable, CorruptRecord):
        # (a process without the run's key: the payload was accepted, and the run goes on
        # once a process holding the key takes it up; the lock is given back now)
        await storage.release_lock(run_id, owner)
        raise
    if hand_off or options.resume == "background":
        await _hand_to_worker(reactor, storage, ex, key)
        return await operations.get(reactor, run_id)
    return await operations.snapshot(
        await operations.run_owned(reactor, storage, run_id, owner, ex, loaded=True,
                                   mode=mode))


def _accepted_events(key: str) -> list[bytes]:
    """The event written with the claim when its call makes no `running` write of its own
    (`claim_and_lock`'s `events`): `interrupt.accepted`, naming the interrupt and who gave the
    payload. The claim's `running` write carries `run.resumed` with the actor instead, so one
    action writes one event naming its actor; the execution that applies a payload accepted
    so (another, or this caller's own drive of a run still `paused`) names nobody."""
    return [records.encode(event(EventKind.INTERRUPT_ACCEPTED, key, actor=audit.who()))]


def _conformed(plan: Plan, key: str, payload: Any) -> bytes | None:
    """The payload encoded, when `key` is an interrupt and the payload conforms to its schema;
    else None (nothing is counted here: the checks come first, see `_validated`)."""
    node = interrupt_node(plan, key)
    if node is None or node.spec.interrupt is None:
        return None
    try:
        return records.encode(conform(payload, node.spec.interrupt.payload_type))
    except Exception:  # said (and counted) by `_validated`, after the checks
        return None


_FACTS: weakref.WeakKeyDictionary[Plan, tuple[bytes, bool]] = weakref.WeakKeyDictionary()


def _check(reactor: Reactor, plan: Plan, key: str, *, clear: bool) -> ResumeCheck:
    """The checks of `_checked` as storage makes them (`ResumeCheck`), with the write a resumed
    run starts with (`running`, no longer waiting on `key`, event `run.resumed`) for a reactor
    without gates (their admission comes first and may decide otherwise). A `clear` payload
    (this process seals nothing) is refused for a run whose inputs are sealed: nothing is
    written, and `continue_run` raises `KeyUnavailable` from the head it is given back."""
    facts = _FACTS.get(plan)
    if facts is None:
        gated = bool(plan.reactor.gates) or any(has_gates(n) for n in plan.nodes.values())
        facts = _FACTS[plan] = (records.fingerprint_marker(plan.fingerprint), not gated)
    marker, resume = facts
    events = ([records.encode(event(EventKind.RUN_RESUMED, detail=key, actor=audit.who()))]
              if resume else [])
    return ResumeCheck(reactor.name, marker, clock.now(), resume, events,
                       refuse_ext=envelope.EXT_CODE if clear else None)


def resumption(plan: Plan, head: RunHead, state: RunState, key: str, *,
               actor: str) -> Resumption | None:
    """The write `driver.drive` starts a resumed run with (`running`, no longer waiting on
    `key`, event `run.resumed` naming `actor`: who gave the payload, `""` for the engine's own
    deadline), made in the claim's own call instead (`claim_and_lock`), if the run is still as
    read here and no other interrupt it waits on is claimed by then. Not for a reactor with
    gates: their admission comes first and may decide otherwise."""
    if head.status != Status.PAUSED or plan.reactor.gates or any(
            has_gates(node) for node in plan.nodes.values()):
        return None
    others = [k for k in state.waiting_on if k != key]
    resumed = msgspec.structs.replace(state, status=Status.RUNNING, updated_at=clock.now(),
                                      waiting_on=others)
    return Resumption(Status.PAUSED.value, head.state, Status.RUNNING.value,
                      records.encode(resumed),
                      [records.encode(event(EventKind.RUN_RESUMED, detail=key, actor=actor))],
                      others)


def accepted(run: Run, claimed: set[str]) -> Run:
    """The run as a caller whose payload was accepted sees it while another execution holds
    it: `running` (the holder applies the claims once free), no longer waiting on the
    interrupts whose payloads were accepted (`claimed`, step keys)."""
    labels = [waiting_label(key) for key in claimed]
    still = [w for w in run.waiting_on if w not in labels]
    if len(still) == len(run.waiting_on):
        return run  # the holder applied them already
    status = Status.RUNNING if run.status is Status.PAUSED else run.status
    timeout_at = run.timeout_at if still else None  # (no deadline left to wait for)
    return msgspec.structs.replace(run, status=status, waiting_on=still, timeout_at=timeout_at)


async def _hand_to_worker(reactor: Reactor, storage: Storage, ex: Execution, key: str) -> None:
    """resume="background": mark the run (read under its lock) running, release it, and let a
    worker go on. (Still `paused` here, the claim's call made no `running` write: it wrote the
    claim's `interrupt.accepted`, naming the actor, so this `run.resumed` names nobody.)"""
    settings = config.settings()
    run_id = ex.run_id
    async with keep_alive(storage, run_id, ex.owner, settings.lock_ttl):
        if ex.state.status == Status.PAUSED:
            await ex.writer.save_state(Status.RUNNING,
                                       events=[event(EventKind.RUN_RESUMED, detail=key)])
    log.info("reactorflow.resume.deferred run_id=%s step=%s reason=background", run_id, key)
    queue.enqueue_run(run_id, reactor.name, version=ex.meta.version)


async def _validated(reactor: Reactor, storage: Storage, run_id: str, node: Node,
                     payload: Any) -> bytes:
    options = node.spec.interrupt
    assert options is not None
    schema = options.payload_type
    try:
        return records.encode(conform(payload, schema))
    except Rejected as exc:
        field, reason = exc.field, exc.reason
    attempts = await storage.incr_counter(run_id, counter_name(node.key))
    limit = options.max_attempts
    exhausted = limit is not None and attempts >= limit
    if exhausted:
        error = RunError(node.key, "PayloadValidationError",
                         f"interrupt {waiting_label(node.key)!r} rejected {attempts} payload(s); "
                         f"the last: {field}: {reason}")
        await fail_run(reactor, storage, run_id, error)
    raise PayloadValidationError(run_id, waiting_label(node.key), field, reason,
                                 attempts=attempts, max_attempts=limit, exhausted=exhausted)


async def fail_run(reactor: Reactor, storage: Storage, run_id: str, error: RunError) -> bool:
    """Roll a paused run back from the root and mark it failed with `error`.

    If another execution owns the run right now, leave it a request: it fails the run (with a
    full rollback) at its next step boundary.

    Returns:
        False when the run, read under its lock, was no longer paused or running (nothing
        done); else True (failed, or the request left).
    """
    settings = config.settings()
    owner = new_owner()
    if not await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait):
        request = Control(ControlKind.FAIL, str(error), error)
        keys = await run_keys(storage, None, run_id)
        await storage.request_control(run_id, records.encode(sealing.control(keys, request)))
        return True
    async with keep_alive(storage, run_id, owner, settings.lock_ttl) as hold:
        ex = await operations.load_owned(reactor, storage, run_id, owner)
        ex.lease = hold  # losing the lock stops the rollback from starting anything more
        if ex.state.status not in (Status.PAUSED, Status.RUNNING):
            return False
        await roll_back(ex, error)
    return True


async def roll_back(ex: Execution, error: RunError) -> None:
    """Roll the run `ex` holds (under its lock, `ex.lease` set) back from the root and mark it
    failed with `error`: no longer waiting on anything."""
    await ex.writer.save_state(Status.ROLLING_BACK, events=[event(EventKind.RUN_ROLLING_BACK,
                                                                  detail=str(error))],
                               steps=ex.close_waiting(), error=error,
                               rollback_trigger=RollbackTrigger.FAILURE, waiting_on=[],
                               deadlines={}, timeout_at=None)
    await drive(ex, WAITS_FOR_THROWS)  # the run is failed when this returns
