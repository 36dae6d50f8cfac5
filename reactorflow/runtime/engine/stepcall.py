"""Calling one step: resolve its arguments, apply `when`, run attempts under its retry policy
and timeout, and encode the result. No storage writes happen here."""

from __future__ import annotations

import inspect
import logging
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from reactorflow import clock, config, records
from reactorflow.definition.graph import join
from reactorflow.definition.params import MISSING, Source
from reactorflow.definition.specs import UNIT_KINDS
from reactorflow.errors import (
    ArgumentError,
    AsyncUnitFailed,
    Halt,
    SerializationError,
    StepTimeout,
    halt_text,
)
from reactorflow.markers import StepContext, follow_path
from reactorflow.middleware import Hook, StepEvent
from reactorflow.protection import fields
from reactorflow.records import ErrorRecord, Event, StepRecord, describe, summary
from reactorflow.runtime.engine.async_units import outcome_of
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.lockkeeper import ensure_live
from reactorflow.runtime.engine.map_reads import map_argument, prepare_readers
from reactorflow.status import EventKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.execution import Execution

log = logging.getLogger("reactorflow.step")
_NOT_RETRIED = (SerializationError, ArgumentError)


class StepEnd(StrEnum):
    """How one call of a step ended."""

    COMPLETED = "completed"
    SKIPPED = "skipped"
    FAILED = "failed"
    HALTED = "halted"
    RETRYING = "retrying"  # in a worker: the next attempt is due at `retry_at`; the run parks
    SNOOZED = "snoozed"  # a gate was busy in a worker: nothing ran, the run tries again later


_FAILED, _DONE = StepEnd.FAILED, StepEnd.COMPLETED  # looked up once (see forward._STEP)
_RESULT, _SKIPPED = Source.RESULT, StepStatus.SKIPPED

PARK_BACKOFF = 0.5
"""In a worker, a retry backoff at least this long (seconds) parks the run instead of sleeping
(a shorter one is slept: re-enqueueing the run costs more)."""


@dataclass(slots=True)
class Outcome:
    status: StepEnd
    value: Any = None
    raw: msgspec.Raw = field(default_factory=msgspec.Raw)
    error: BaseException | None = None
    body_started: bool = False
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    events: list[Event] = field(default_factory=list)
    retry_at: float | None = None  # RETRYING: when the next attempt is due


def scope_cancelled() -> bool:
    """Whether the caller's cancel scope was cancelled: a real cancellation of the run, as
    opposed to a `CancelledError` that step code raised (e.g. it awaited a task that someone
    else cancelled), which is a step failure."""
    return anyio.current_effective_deadline() == -math.inf


def halted_record(out: Outcome) -> StepRecord:
    """The record of a step that raised `rf.Halt`; its error message is the halt reason."""
    reason = halt_text(getattr(out.error, "reason", ""))
    return StepRecord(StepStatus.HALTED, out.attempts, out.started_at, out.finished_at,
                      error=ErrorRecord("Halt", reason))


def read_input(inputs: Any, name: str, default: Any = MISSING) -> Any:
    """An input field (a TypedDict's field left out takes the parameter's default)."""
    if not isinstance(inputs, dict):
        return getattr(inputs, name)
    if name not in inputs and default is not MISSING:
        return default
    return inputs[name]


async def arguments(ex: Execution, node: Node, payload: Any = MISSING) -> dict[str, Any]:
    """The keyword arguments of a step, wherever it is resolved: in its run's execution, in a
    worker running it as an async unit, in a rollback or a gate's release. What its map
    readers take (`list[T]`, `list[rf.Outcome[T]]`) is loaded from storage first, so that
    every caller sees the same arguments.

    Raises:
        ArgumentError: a parameter cannot be resolved (naming the step and the parameter).
    """
    if node.reads_maps:
        await prepare_readers(ex, node)
    return resolve_arguments(ex, node, payload)


def resolve_arguments(ex: Execution, node: Node, payload: Any = MISSING) -> dict[str, Any]:
    """The keyword arguments of a step (its StepContext is added per attempt), from what `ex`
    holds already: call `arguments` instead, which loads what map readers take first (only a
    plain step, which reads no map, is resolved here directly: the forward drive's fast path).
    """
    kwargs: dict[str, Any] = {}
    level = node.level
    for param in node.spec.params:
        source = param.source
        try:
            if source is _RESULT:
                dep = join(level, param.ref) if level else param.ref
                record = ex.records.get(dep)  # (as `ex.status_of`)
                if record is not None and record.status == _SKIPPED:
                    kwargs[param.name] = param.default
                    continue
                if param.map_read is not None:
                    value = map_argument(ex, dep, param.map_read)
                    kwargs[param.name] = follow_path(value, param.path) if param.path else value
                    continue
                if ex.plan.nodes[dep].kind in UNIT_KINDS:
                    value = unit_argument(ex, node, param.name, dep, param.outcome)
                    if param.path and not param.outcome:
                        value = follow_path(value, param.path)
                    kwargs[param.name] = value
                    continue
                value = ex.value_of(dep)
                kwargs[param.name] = follow_path(value, param.path) if param.path else value
            elif source is Source.INPUT:
                value = read_input(ex.level_inputs[level], param.ref, param.default)
                kwargs[param.name] = follow_path(value, param.path) if param.path else value
            elif source is Source.DEFAULT:
                kwargs[param.name] = param.default
            elif source is Source.PAYLOAD:
                kwargs[param.name] = payload
        except (KeyError, IndexError, AttributeError, TypeError) as exc:
            where = "result of " + param.ref if source is Source.RESULT else "input " + param.ref
            raise ArgumentError(
                f"step {node.key!r}: cannot resolve parameter {param.name!r} from the {where} "
                f"at path {'.'.join(param.path)!r}: {summary(exc)}",
                run_id=ex.run_id, step=node.key, cause=exc,
            ) from exc
    return kwargs


def unit_argument(ex: Execution, node: Node, name: str, dep: str, wants_outcome: bool) -> Any:
    """The value a reader gets from a finished async unit (see runtime.engine.async_units)."""
    outcome = outcome_of(ex, dep)
    if wants_outcome:
        return outcome
    if not outcome.ok:
        assert outcome.error is not None
        raise AsyncUnitFailed(ex.run_id, node.key, dep,
                              f"{outcome.error.type}: {outcome.error.message}")
    return outcome.value


def skip_reason(ex: Execution, node: Node) -> str | None:
    """Why a step whose dependencies have settled must be skipped, if it must: the first of
    its `Node.skip_checks` whose dependency was skipped."""
    found = ex.records.get  # (as `ex.status_of`, inline: every step with dependencies asks)
    for dep, reason in node.skip_checks:
        record = found(dep)
        if record is not None and record.status == _SKIPPED:
            return reason
    return None


def context_for(ex: Execution, node: Node, attempt: int) -> StepContext:
    reactor = ex.plan.levels[node.level].reactor.name
    key = ex.step_prefix + node.key
    rewound = ex.state.rewinds.get(key)  # a rewound step's effects were undone: a new key
    return StepContext(ex.run_id, reactor, key, attempt,
                       f"{ex.run_id}:{key}" if not rewound else f"{ex.run_id}:{key}:{rewound}")


async def evaluate_when(ex: Execution, node: Node, kwargs: dict[str, Any]) -> bool:
    spec = node.spec
    assert spec.when is not None
    try:
        verdict = spec.when(**{name: kwargs[name] for name in spec.when_names})
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception as exc:
        raise ArgumentError(f"step {node.key!r}: its when= condition raised {summary(exc)}",
                            run_id=ex.run_id, step=node.key, cause=exc) from exc
    return bool(verdict)


def encode_result(ex: Execution, node: Node, result: Any) -> tuple[msgspec.Raw, Any]:
    """Encode a result for storage and decode it back with the step's annotation.

    Dependents receive the decoded value, so a run that resumed from storage sees exactly what
    an uninterrupted run sees. A result of one of the node's `same_types` (an `int` for an `int`
    annotation...) decodes back as an equal value of its type: it is kept, not decoded.
    """
    try:
        clear = records.encode(result)
        raw = msgspec.Raw(ex.keys.seal(fields.result(node.key), clear))  # (for its run, step)
    except (TypeError, OverflowError) as exc:
        raise SerializationError(
            f"step {node.key!r} returned a {type(result).__name__}, which cannot be stored: "
            f"{describe(exc)}. Return builtins, a msgspec.Struct or a dataclass",
            run_id=ex.run_id, step=node.key, type_name=type(result).__name__, cause=exc,
        ) from exc
    if type(result) in node.same_types:
        return raw, result
    try:
        return raw, node.decoder.decode(clear)
    except msgspec.ValidationError as exc:
        raise SerializationError(
            f"step {node.key!r} returned a {type(result).__name__} that does not match its return "
            f"annotation {node.result_type!r}: {describe(exc)}",
            run_id=ex.run_id, step=node.key, type_name=type(result).__name__, cause=exc,
        ) from exc


async def call_step(ex: Execution, node: Node, payload: Any = MISSING, *,
                    check_when: bool = True,
                    failed: tuple[float, BaseException] | None = None) -> Outcome:
    """Run the step to an outcome. Cancellation and interpreter exits propagate.

    A step parked between attempts (its record has `retry_at`) goes on with its next attempt
    (its `when=` is not asked again), once that is due: until then an execution that parks
    (a worker) gets `RETRYING` back, another one sleeps. In a worker, a backoff of at least
    `PARK_BACKOFF` seconds ends the call `RETRYING` (the run parks) instead of sleeping; in
    any execution that may park, one longer than `park_after` does (`parks_for`).

    `failed=(began, error)`: the first attempt already ran (the forward drive's fast path for a
    plain step, `Forward._plain`), began then and raised `error`; it is taken from there as if
    it had raised here (retried, failed, halted, or re-raised), without calling the step again.
    """
    spec = node.spec
    key = node.key
    out = Outcome(_FAILED)
    record = ex.records.get(key)
    retry_at = record.retry_at if record is not None else None
    try:
        kwargs = await arguments(ex, node, payload) if spec.params else {}
        if (check_when and retry_at is None and spec.when is not None
                and not await evaluate_when(ex, node, kwargs)):
            out.status = StepEnd.SKIPPED
            out.events.append(event(EventKind.STEP_SKIPPED, key, detail="when= was false"))
            return out
    except ArgumentError as exc:
        out.error = exc
        out.events.append(event(EventKind.STEP_FAILED, key, detail=str(exc)))
        return out
    context_name = node.context_name
    hooks = ex.hooks if ex.hooks else None  # asked once: no middleware, no event objects
    retry = spec.retry
    timeout = spec.timeout
    fn = spec.fn
    events = out.events
    attempt = 0
    if record is not None and retry_at is not None:  # parked between attempts
        attempt = record.attempts
        out.started_at, out.body_started = record.started_at, True
        if not await _retry_due(ex, retry_at):
            out.status, out.attempts, out.retry_at = StepEnd.RETRYING, attempt, retry_at
            return out
        if hooks is not None:
            hooks.call(Hook.AFTER_RETRY, StepEvent(ex.run_id, ex.reactor, key, attempt + 1))
    while True:
        if failed is None:  # (else the caller ran this attempt already)
            await ensure_live(ex.lease)  # a lost lock starts no further attempt
        attempt += 1
        began = clock.now() if failed is None else failed[0]
        if out.started_at is None:
            out.started_at = began
        if context_name is not None:
            kwargs[context_name] = context_for(ex, node, attempt)
        events.append(Event(began, EventKind.STEP_STARTED, key, attempt))
        if hooks is not None:
            hooks.call(Hook.BEFORE_STEP, StepEvent(ex.run_id, ex.reactor, key, attempt))
        out.body_started = True
        error: BaseException
        try:
            if failed is not None:  # the first attempt, run by the caller
                first, failed = failed[1], None
                raise first
            if timeout is not None:
                with clock.move_on_after(timeout) as scope:
                    result = await fn(**kwargs)
                if scope.cancelled_caught:
                    raise StepTimeout(ex.run_id, key, timeout)
            else:
                result = await fn(**kwargs)
            out.raw, out.value = encode_result(ex, node, result)
        except Halt as halt:
            halt.reason = halt_text(halt.reason)  # a subclass may have set anything
            out.status = StepEnd.HALTED
            out.error = halt
            out.attempts = attempt
            out.finished_at = clock.now()
            events.append(Event(out.finished_at, EventKind.STEP_HALTED, key, attempt, halt.reason))
            return out
        except Exception as exc:
            error = exc
        except anyio.get_cancelled_exc_class() as exc:
            if scope_cancelled():
                raise  # the run itself is being cancelled
            error = exc
        else:
            out.status = _DONE
            out.attempts = attempt
            out.finished_at = finished = clock.now()
            events.append(Event(finished, EventKind.STEP_COMPLETED, key, attempt))
            if hooks is not None:
                hooks.call(Hook.AFTER_STEP, StepEvent(ex.run_id, ex.reactor, key, attempt,
                                                   StepStatus.COMPLETED))
            return out
        if (retry is not None and not isinstance(error, _NOT_RETRIED)
                and retry.should_retry(error, attempt)):
            delay = retry.delay(attempt)
            _note_retry(ex, node, attempt, error, delay, events)
            if parks_for(ex, delay):
                out.status, out.error, out.attempts = StepEnd.RETRYING, error, attempt
                out.retry_at = clock.now() + delay
                return out
            if delay > 0:
                await clock.sleep(delay, why=f"retry backoff of step {key!r} (attempt "
                                             f"{attempt + 1} of {retry.attempts})")
            if hooks is not None:
                hooks.call(Hook.AFTER_RETRY, StepEvent(ex.run_id, ex.reactor, key, attempt + 1))
            continue
        out.error = error
        out.attempts = attempt
        out.finished_at = clock.now()
        events.append(Event(out.finished_at, EventKind.STEP_FAILED, key, attempt, summary(error)))
        if hooks is not None:
            hooks.call(Hook.AFTER_STEP, StepEvent(ex.run_id, ex.reactor, key, attempt,
                                               StepStatus.FAILED, error))
        return out


def parks_for(ex: Execution, delay: float) -> bool:
    """Whether a retry backoff of `delay` seconds parks the run (`RETRYING`) instead of being
    slept here: in a worker from `PARK_BACKOFF` on; anywhere past `park_after` (the run then
    parks on its timer, `parking.park`; an async unit parks between its attempts, its job put
    back for the next one, `jobs._park_unit`). A map element's child's retries are slept in
    its job."""
    if ex.mode.parks:
        return delay >= PARK_BACKOFF
    return _may_park(ex) and delay > config.settings().park_after


def _may_park(ex: Execution) -> bool:
    return not ex.mode.maps_inline


async def _retry_due(ex: Execution, retry_at: float) -> bool:
    """Whether a parked step's next attempt may start now (an execution that does not park
    sleeps until then)."""
    wait = retry_at - clock.now()
    if wait <= 0:
        return True
    if ex.mode.parks or (_may_park(ex) and wait > config.settings().park_after):
        return False
    await clock.sleep(wait, why=f"the next attempt of a parked step of run {ex.run_id}")
    return True


def _note_retry(ex: Execution, node: Node, attempt: int, error: BaseException, delay: float,
                events: list[Event]) -> None:
    key = node.key
    hooks = ex.hooks
    events.append(event(EventKind.STEP_RETRIED, key, attempt,
                        f"{summary(error)}; next in {delay:.3f}s"))
    if hooks:
        hooks.call(Hook.BEFORE_RETRY, StepEvent(ex.run_id, ex.reactor, key, attempt,
                                             StepStatus.FAILED, error, delay))
    if log.isEnabledFor(logging.INFO):
        log.info("reactorflow.step.retry run_id=%s step=%s attempt=%d delay=%.3f error=%s",
                 ex.run_id, key, attempt, delay, summary(error))
