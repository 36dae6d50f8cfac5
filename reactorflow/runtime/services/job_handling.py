"""The bodies of the jobs the runtime enqueues (`runtime.engine.job_queue`): whoever runs a job
(a Dramatiq actor, the in-process queue, the sweeper) calls these.

Jobs carry identities only; storage is the truth, and every body is idempotent (a job may be
delivered more than once). A job whose fields are malformed, or whose identity disagrees with
its run's record (another reactor, no such run), is dropped and logged before it writes
anything (`runtime.engine.job_checks`): a forged job never fails or touches a healthy run. Step code
is never retried by the queue: its exceptions are handled by the executor and never reach the
job. What does reach the job is an infrastructure error (storage unreachable...), which the
queue may retry. A run that can never be executed here
(unknown reactor, unreadable record, incompatible graph) is marked failed on first delivery and
the job ends with `PermanentFailure` (never retried).
"""

from __future__ import annotations

import difflib
import logging
import os
import random
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, NamedTuple, assert_never

from reactorflow import clock, config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import plan_for
from reactorflow.errors import (
    CorruptRecord,
    DefinitionChanged,
    GateBusy,
    KeyUnavailable,
    MigrationError,
    ReactorflowError,
    RunNotFound,
)
from reactorflow.middleware import Hooks
from reactorflow.protection import sealing
from reactorflow.protection.resolve import stored_keys
from reactorflow.records import ElementRecord, ErrorRecord, StepRecord, summary
from reactorflow.runtime.engine import job_checks as jobcheck
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.async_units import FINISHED, report, unit_lock
from reactorflow.runtime.engine.execution import Execution, event, hooks_for
from reactorflow.runtime.engine.job_queue import Job, JobKind
from reactorflow.runtime.engine.lockkeeper import keeper
from reactorflow.runtime.engine.mode import UNIT, WORKER
from reactorflow.runtime.engine.ownership import acquire, keep_alive, new_owner
from reactorflow.runtime.engine.rollback import call_handler
from reactorflow.runtime.engine.stepcall import Outcome, StepEnd, call_step, halted_record
from reactorflow.runtime.gates.scope import GateHolds
from reactorflow.runtime.gates.step_gates import call_gated
from reactorflow.runtime.maps import element_job, undo_job
from reactorflow.runtime.ops import migrations, operations
from reactorflow.runtime.ops.deadlines import deadline_due, due_interrupts
from reactorflow.runtime.services import version_gate
from reactorflow.status import EventKind, Status, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.worker")

RUN_LOCK_WAIT = 2.0
"""Seconds a worker waits for a run's lock before it reads the run (lock, then load)."""
SNOOZE_DELAY = 1.0
"""A worker that could not take the run re-enqueues itself this long later (plus jitter)."""
SHOWN_REACTORS = 10
"""How many of its reactors a worker lists when it is asked for one it does not declare."""


async def execute(job: Job) -> None:
    """Run one job's body.

    Raises:
        PermanentFailure: the job can never succeed (see `execute_run`, `execute_unit`).
    """
    with job_context(job.headers):
        match job.kind:
            case JobKind.RUN:
                await execute_run(job.run_id, job.reactor, job.snoozes, version=job.version,
                                  refused=job.refused)
            case JobKind.UNIT:
                await execute_unit(job.run_id, job.reactor, job.step, job.snoozes,
                                   version=job.version, refused=job.refused)
            case JobKind.ELEMENT:
                await execute_element(job.run_id, job.reactor, job.step, job.index,
                                      version=job.version, refused=job.refused,
                                      count=job.count)
            case JobKind.UNDO:
                await execute_undo(job.run_id, job.reactor, job.step, job.index,
                                   version=job.version, refused=job.refused)
            case _:
                assert_never(job.kind)


def job_context(headers: Mapping[str, str] | None) -> AbstractContextManager[object]:
    """The configured middleware's context for a job with these headers (`Middleware.
    job_context`, e.g. the trace the job continues)."""
    chain = config.settings().middleware
    if not headers or not chain:
        return nullcontext()
    problem = jobcheck.bad_headers(headers)
    if problem is not None:  # (only context: the job itself still runs)
        log.warning("reactorflow.job.headers_ignored: %s", problem)
        return nullcontext()
    return Hooks(chain).job_context(headers)


async def _admitted(job: Job, *, unknown: bool = False) -> bool:
    """Whether a worker may act on a well-formed `job`: when its reactor is not declared here
    (`unknown`: the worker would fail what the job is for), its run's record must agree with it
    (else it is dropped and logged)."""
    problem = await jobcheck.disowned(config.current_storage(), job) if unknown else None
    if problem is not None:
        jobcheck.drop(job, problem)
        return False
    return True


class _Admission(NamedTuple):
    """What a worker acts on a job with: the job's reactor (None when it is not declared
    here) and the storage."""

    reactor: Reactor | None
    storage: Storage


async def _admit(job: Job) -> tuple[Job, _Admission] | None:
    """The job (its version as `version_gate.admit` found it) with its reactor and the
    storage when a worker may act on it (its fields well-formed, checked before any storage
    call, then `_admitted`), else None (the job was dropped and logged, or handed back for want
    of its version). The reactor is the job's version's; for a
    run job whose version is not declared here, the newest (the run migrates under its lock)."""
    problem = jobcheck.malformed(job)
    if problem is not None:
        jobcheck.drop(job, problem)
        return None
    found = await version_gate.admit(job)
    if found is None:
        return None
    job, name = found, found.reactor
    reactor = registry.lookup(name, job.version)
    if reactor is None and job.kind is JobKind.RUN:
        reactor = registry.lookup(name)
    if not await _admitted(job, unknown=reactor is None):
        return None
    return job, _Admission(reactor, config.current_storage())


class PermanentFailure(ReactorflowError):
    """The job can never succeed (it already marked the run failed): never retried."""


def unknown_reactor(name: str) -> str:
    """Why a worker cannot run a reactor, and what to start it with instead."""
    modules = [m for m in os.environ.get(config.WORKER_MODULES_ENV, "").split(",") if m]
    known = registry.names()
    close = difflib.get_close_matches(name, known, n=1)
    shown = ", ".join(known[:SHOWN_REACTORS]) + (
        f" and {len(known) - SHOWN_REACTORS} more" if len(known) > SHOWN_REACTORS else "")
    declared = f"it declares {shown}" if known else "it declares no reactor"
    guess = f"; did you mean {close[0]!r}?" if close else ""
    if modules:
        return (f"reactor {name!r} is not declared in this worker, started with "
                f"{', '.join(modules)} ({declared}{guess}). Start the worker with the module "
                f"that declares it as well: reactorflow worker {' '.join(modules)} <module>")
    return (f"reactor {name!r} is not declared in this worker, the embedded worker of this "
            f"process ({declared}{guess}). It knows the reactors this process declared: import "
            "the module that declares it before its runs reach the worker")


async def execute_run(run_id: str, reactor_name: str, snoozes: int = 0, *, version: int = 1,
                      refused: float = 0.0) -> None:
    """The worker resume protocol: lock, then load, then act on the stored status; then, for
    a paused run whose interrupt deadline passed (its timer fired), settle that deadline
    (`deadlines.deadline_due`: failed, or resumed with its `on_timeout`).

    Lock: if another execution holds the run for `RUN_LOCK_WAIT` seconds, re-enqueue this job
    `SNOOZE_DELAY` (+ jitter) later and end. Load: read the run while holding its lock (the
    first try takes the lock and reads the run in one call, `Storage.lock_and_load`). Act:
    drive a `running` run (a parked one only when one of its units finished or its wait ran
    out: an early or duplicate job writes nothing), finish a rollback, apply claimed payloads
    of a paused one; a settled run needs nothing. A step that waits for an async unit parks the
    run (`driver.park`) instead of holding this worker.

    Raises:
        PermanentFailure: the run can never be executed here (unknown reactor, unreadable
            record, incompatible graph); it was marked failed.
    """
    job = Job(JobKind.RUN, run_id, reactor_name, snoozes=snoozes, version=version,
              refused=refused)
    found = await _admit(job)
    if found is None:
        return
    job, (reactor, storage) = found
    if reactor is None:
        reason = unknown_reactor(reactor_name)
        await operations.mark_unrecoverable(storage, run_id, "UnknownReactor", reason)
        raise PermanentFailure(reason, run_id=run_id)
    settings = config.settings()
    owner = new_owner()
    held, stored = await storage.lock_and_load(run_id, owner, settings.lock_ttl)
    if not held and not await acquire(storage, run_id, owner, settings.lock_ttl,
                                      RUN_LOCK_WAIT):
        delay = SNOOZE_DELAY + random.random() * SNOOZE_DELAY
        queue.enqueue_run(run_id, reactor_name, version=job.version, delay=delay,
                          snoozes=snoozes + 1)
        if snoozes in (0, 10, 100):
            log.info("reactorflow.resume.waiting run_id=%s reactor=%s snoozes=%d", run_id,
                     reactor_name, snoozes)
        return
    try:
        ex = await operations.run_owned(reactor, storage, run_id, owner, mode=WORKER,
                                        stored=stored)
        if ex.state.status is Status.PAUSED and due_interrupts(ex.state, ex.claims,
                                                                clock.now()):
            # its timer fired (or a sweep found it): the deadline is settled here, lock free
            await deadline_due(reactor, storage, run_id, mode=WORKER)
    except RunNotFound as exc:
        if exc.other_reactor is not None:  # storage is the truth: the job is wrong
            jobcheck.drop(job, exc.message)
        else:
            log.info("reactorflow.worker.stray run_id=%s: no such run (expired?)", run_id)
    except DefinitionChanged as exc:
        if exc.version is not None and not exc.differences:  # moved to a version not here
            await version_gate.hand_back(job, exc.version)
            return
        await operations.mark_unrecoverable(storage, run_id, type(exc).__name__, exc.message)
        raise PermanentFailure(exc.message, run_id=run_id) from exc
    except (CorruptRecord, MigrationError) as exc:
        await operations.mark_unrecoverable(storage, run_id, type(exc).__name__, exc.message)
        raise PermanentFailure(exc.message, run_id=run_id) from exc
    except KeyUnavailable as exc:  # this worker lacks a key: the run is left as it is
        log.error("reactorflow.worker.key_unavailable run_id=%s field=%s key_id=%s: this "
                  "worker holds no key for the run's values; the job is retried (give the "
                  "worker's codec that key)", run_id, exc.field, exc.key_id)
        raise


async def execute_unit(run_id: str, reactor_name: str, key: str, snoozes: int = 0, *,
                       version: int = 1, refused: float = 0.0) -> None:
    """Run one async unit of a run and write its record into the run (see
    `runtime.engine.async_units`).
    `snoozes`: how often the unit was put back because its gate was busy (capped by
    `gate_snooze_limit`, as a run's snoozes are).

    Raises:
        PermanentFailure: the unit can never run here (unknown reactor, unreadable record);
            its failure was reported to the run.
    """
    job = Job(JobKind.UNIT, run_id, reactor_name, key, snoozes=snoozes, version=version,
              refused=refused)
    found = await _admit(job)
    if found is None:
        return
    job, (reactor, storage) = found
    if reactor is None:
        reason = unknown_reactor(reactor_name)
        record = StepRecord(StepStatus.FAILED, 0, clock.now(), clock.now(),
                            error=ErrorRecord("UnknownReactor", reason))
        await report(storage, run_id, key, record, [event(EventKind.STEP_FAILED, key)])
        raise PermanentFailure(reason, run_id=run_id, step=key)
    settings = config.settings()
    lock, owner = unit_lock(run_id, key), new_owner()
    if not await acquire(storage, lock, owner, settings.lock_ttl, 0.0):
        return  # another worker is running this unit right now (a duplicate message)
    async with keep_alive(storage, lock, owner, settings.lock_ttl) as hold:
        stored = await storage.load_run(run_id)
        if stored is None:
            log.error("reactorflow.async.orphaned run_id=%s step=%s: the run is gone, the unit "
                      "did not run", run_id, key)
            return
        if stored.head.reactor != reactor_name:  # storage is the truth: the job is wrong
            jobcheck.drop(job, f"the run belongs to reactor {stored.head.reactor!r}")
            return
        own = migrations.declared_for(reactor, stored.head.meta)
        if own is None:  # its run moved, since the job was sent, to a version not here
            await version_gate.hand_back(job, records.meta_version(stored.head.meta))
            return
        reactor = own
        try:
            hooks = hooks_for(reactor)  # its gate places are held as the unit's own lock
            keys = await stored_keys(storage, run_id, stored.head.meta)
            ex = Execution.from_stored(stored, plan=plan_for(reactor), storage=storage,
                                       owner=owner, claims={}, hooks=hooks, mode=UNIT,
                                       gates=GateHolds(storage, lock, hooks=hooks,
                                                       reactor=reactor_name), keys=keys)
        except (CorruptRecord, DefinitionChanged, KeyUnavailable) as exc:  # it cannot change
            record = StepRecord(StepStatus.FAILED, 0, None, clock.now(),
                                error=ErrorRecord(type(exc).__name__, exc.message))
            await report(storage, run_id, key, record, [event(EventKind.STEP_FAILED, key)])
            raise PermanentFailure(exc.message, run_id=run_id, step=key) from exc
        current = ex.records.get(key)
        if current is None or current.status in FINISHED:
            return  # never dispatched, or already done: a stray or duplicate message
        keeper.attach(hold, ex.gates)
        ex.lease = hold  # the unit's own lock: lost, no further attempt starts
        await _run_unit(ex, key, snoozes)


async def execute_element(run_id: str, reactor_name: str, key: str, index: int, *,
                          version: int = 1, refused: float = 0.0, count: int = 1) -> None:
    """Run elements `index` .. `index + count - 1` of a fanned-out map, one after the other
    (a chunk, see `runtime.maps.fanout`); elements whose reactor is not declared here fail (and
    their run is told)."""
    job = Job(JobKind.ELEMENT, run_id, reactor_name, key, index=index, version=version,
              refused=refused, count=count)
    found = await _admit(job)
    if found is None:
        return
    job, (reactor, storage) = found
    if reactor is None:
        await _fail_element(storage, job, "UnknownReactor",
                            f"reactor {reactor_name!r} is not declared in this worker")
        raise PermanentFailure(f"unknown reactor {reactor_name!r}", run_id=run_id, step=key)
    await element_job.run_chunk(storage, reactor, run_id, key, index, job.count)


async def execute_undo(run_id: str, reactor_name: str, key: str, index: int, *,
                       version: int = 1, refused: float = 0.0) -> None:
    """Undo one completed element of a fanned-out map (see `runtime.maps.undo_throws`); an element
    whose reactor is not declared here records that as its undo's failure.

    Raises:
        PermanentFailure: the reactor is not declared in this worker.
    """
    job = Job(JobKind.UNDO, run_id, reactor_name, key, index=index, version=version,
              refused=refused)
    found = await _admit(job)
    if found is None:
        return
    job, (reactor, storage) = found
    if reactor is None:
        reason = unknown_reactor(reactor_name)
        await undo_job.give_up(storage, run_id, reactor_name, key, index, "UnknownReactor",
                               reason, version=job.version)
        raise PermanentFailure(reason, run_id=run_id, step=key)
    await undo_job.run_undo(storage, reactor, run_id, key, index)


async def _fail_element(storage: Storage, job: Job, kind: str, reason: str) -> None:
    """Fail the elements of a job (its chunk) that can never run (each one without an outcome:
    first wins), unless the job disagrees with its map's job data (no such fanned-out map,
    another reactor, an index past its end): then it is dropped."""
    shared = await element_job.shared_args(storage, job.run_id, job.step)
    problem = ("the run has no fanned-out map of that key" if shared is None
               else jobcheck.foreign_element(job, shared))
    if problem is not None:
        jobcheck.drop(job, problem)
        return
    record = ElementRecord(StepStatus.FAILED, error=ErrorRecord(kind, reason))
    for index in range(job.index, job.index + job.count):
        await element_job.settle(storage, job.run_id, job.reactor, job.step, index, record,
                                 atomic=True, total=None, version=job.version)


async def _run_unit(ex: Execution, key: str, snoozes: int) -> None:
    node = ex.plan.nodes[key]
    if node.spec.gates:  # a busy gate puts the unit back for later (`mode.UNIT`)
        out = await call_gated(ex, node, check_when=False)
    else:
        out = await call_step(ex, node, check_when=False)
    events: list[Any] = list(out.events)
    if out.status is StepEnd.SNOOZED and not _snooze_unit(ex, key, out, snoozes):
        return
    match out.status:
        case StepEnd.COMPLETED:
            record = StepRecord(StepStatus.COMPLETED, out.attempts, out.started_at,
                                out.finished_at, out.raw)
        case StepEnd.HALTED:
            record = halted_record(out)
        case StepEnd.FAILED:
            assert out.error is not None
            rollback_error = await _compensate_unit(ex, key, out.error, out.body_started,
                                                    events)
            record = StepRecord(StepStatus.FAILED, out.attempts, out.started_at,
                                out.finished_at, error=ErrorRecord.from_exception(out.error),
                                rollback_error=rollback_error)
        case StepEnd.SNOOZED:  # past the cap: failed, its body never ran
            message = _capped(out.error, snoozes)
            record = StepRecord(StepStatus.FAILED, out.attempts, out.started_at,
                                out.finished_at, error=ErrorRecord("GateBusy", message))
            events.append(event(EventKind.STEP_FAILED, key, detail=message))
        case StepEnd.SKIPPED:  # its period was used meanwhile (no when=: checked at dispatch)
            record = StepRecord(StepStatus.SKIPPED, 0, out.started_at, clock.now())
        case StepEnd.RETRYING:  # a backoff past `park_after`: parked until the next attempt
            await _park_unit(ex, key, out, events)
            return
        case _:
            assert_never(out.status)
    await report(ex.storage, ex.run_id, key, record, events, keys=ex.keys)


async def _park_unit(ex: Execution, key: str, out: Outcome, events: list[Any]) -> None:
    """An attempt failed and the next is more than `park_after` away: write the unit's record
    `running` with the attempts made and the next one's time (it stays in the unit index and
    settles nothing: `save_unit(settled=False)`), and put its job back for then, holding no
    worker thread meanwhile. A job that comes before its time (a duplicate, a sweep) is put
    back again without writing."""
    assert out.retry_at is not None
    if out.error is not None:  # (else an early job of a unit parked already)
        record = StepRecord(StepStatus.RUNNING, out.attempts, out.started_at,
                            error=ErrorRecord.from_exception(out.error), retry_at=out.retry_at)
        keys = ex.keys
        await ex.storage.save_unit(ex.run_id, key, records.encode(sealing.step(keys, record)),
                                   [records.encode(sealing.event(keys, e)) for e in events],
                                   settled=False)
    queue.current().enqueue(Job.unit(ex.run_id, ex.reactor, key, version=ex.meta.version),
                            delay=max(0.0, out.retry_at - clock.now()))
    log.info("reactorflow.async.parked run_id=%s step=%s attempts=%d next_in=%.1fs", ex.run_id,
             key, out.attempts, out.retry_at - clock.now())


def _snooze_unit(ex: Execution, key: str, out: Outcome, snoozes: int) -> bool:
    """A unit's gate is busy: put it back a little later, holding nothing (False), or, past
    `gate_snooze_limit` snoozes, let it fail (True)."""
    settings = config.settings()
    if snoozes + 1 > settings.gate_snooze_limit:
        return True
    delay = settings.gate_snooze * (0.5 + random.random() / 2)
    queue.current().enqueue(Job.unit(ex.run_id, ex.reactor, key, version=ex.meta.version,
                                     snoozes=snoozes + 1),
                            delay=delay)
    log.info("reactorflow.gate.snoozed run_id=%s step=%s snoozes=%d error=%s", ex.run_id, key,
             snoozes + 1, summary(out.error) if out.error is not None else "-")
    return False


def _capped(busy: BaseException | None, snoozes: int) -> str:
    """The error of a unit still busy after `snoozes` snoozes (it names the gate and key)."""
    what = busy.message if isinstance(busy, GateBusy) else summary(busy) if busy else "a gate"
    return (f"{what} (still busy after {snoozes} snoozes; raise gate_snooze_limit to wait "
            "longer)")


async def _compensate_unit(ex: Execution, key: str, error: BaseException, body_started: bool,
                           events: list[Any]) -> ErrorRecord | None:
    """A unit whose last attempt failed compensates itself once; the handler's failure, if any."""
    handler = ex.plan.nodes[key].spec.compensate
    if handler is None or not body_started:
        return None
    events.append(event(EventKind.COMPENSATE_STARTED, key))
    try:
        await call_handler(ex, handler, key, error)
    except Exception as exc:
        events.append(event(EventKind.COMPENSATE_FAILED, key, detail=summary(exc)))
        return ErrorRecord.from_exception(exc)
    events.append(event(EventKind.COMPENSATE_COMPLETED, key))
    return None


async def give_up(job: Job, reason: str) -> None:
    """The queue gave up on a job after infrastructure errors: fail what it was for (the unit,
    or the run) with `reason`, and publish it (waiters wake at once). A job that is malformed
    or disagrees with its run's record is dropped instead (logged): it fails nothing."""
    problem = jobcheck.malformed(job)
    if problem is not None:
        jobcheck.drop(job, problem)
        return
    if not await _admitted(job, unknown=True):
        return
    storage = config.current_storage()
    match job.kind:
        case JobKind.UNIT:
            record = StepRecord(StepStatus.FAILED, 0, None, clock.now(),
                                error=ErrorRecord("JobRetriesExhausted", reason))
            await report(storage, job.run_id, job.step, record,
                         [event(EventKind.STEP_FAILED, job.step)])
        case JobKind.RUN:
            await operations.mark_unrecoverable(storage, job.run_id, "JobRetriesExhausted",
                                                reason)
        case JobKind.ELEMENT:
            await _fail_element(storage, job, "JobRetriesExhausted", reason)
        case JobKind.UNDO:
            await undo_job.give_up(storage, job.run_id, job.reactor, job.step, job.index,
                                   "JobRetriesExhausted", reason, version=job.version)
        case _:
            assert_never(job.kind)
