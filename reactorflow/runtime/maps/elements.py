"""One element of a map: its arguments, its attempts (the map's retry policy and timeout apply
per element), its result encoded and checked against the annotation, and its compensate when it
failed. No storage writes happen here (the caller batches element outcomes)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import msgspec

from reactorflow import clock, config, records
from reactorflow.definition.graph import join, plan_for
from reactorflow.definition.params import MapRead
from reactorflow.definition.specs import UNIT_KINDS, StepKind
from reactorflow.errors import ArgumentError, SerializationError, StepTimeout
from reactorflow.markers import StepContext
from reactorflow.protection import fields
from reactorflow.protection.keys import RunKeys
from reactorflow.records import ElementRecord, ErrorRecord, describe, summary
from reactorflow.runtime.engine.lockkeeper import Hold, ensure_live
from reactorflow.runtime.engine.map_reads import element_count, element_key, load_list
from reactorflow.runtime.engine.stepcall import read_input, scope_cancelled, unit_argument
from reactorflow.status import StepStatus
from reactorflow.storage.contract.maps import Slots

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node, Plan
    from reactorflow.middleware import Hooks
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.runtime.gates.scope import GateHolds

log = logging.getLogger("reactorflow.map")
_NOT_RETRIED = (SerializationError, ArgumentError)


class Scope(Protocol):
    """Where an element runs: its run (an `Execution`, or an element job's `JobScope`)."""

    @property
    def run_id(self) -> str: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def keys(self) -> RunKeys:
        """The run's keys (its values are sealed and opened with them)."""

    @property
    def gates(self) -> GateHolds | None:
        """The gate places its element reactors' gates join (None: their own)."""

    @property
    def hooks(self) -> Hooks | None: ...

    @property
    def step_prefix(self) -> str:
        """What its step names start with: `<map>:<index>.` in an element reactor's element
        (whose reactor nests this map), else ""."""

    @property
    def slots(self) -> Slots:
        """Where its maps' element slots live (see `Execution.slots`)."""

    @property
    def owner(self) -> str | None:
        """The run's lock owner its slot writes are fenced by (`save_elements`): the owning
        execution's; "" or None for a job, which never holds the run's lock (unfenced)."""

    @property
    def lease(self) -> Hold | None:
        """The lock hold that proves it may still start work (`liveness.ensure_live`)."""


def fence(scope: Scope) -> str | None:
    """The `owner` a scope's slot writes name (None: unfenced, an element or undo job)."""
    return scope.owner or None


@dataclass(frozen=True, slots=True)
class JobScope:
    """An element job's scope: it knows its run by id and plan only (never loads it), and the
    gate places its job renews."""

    run_id: str
    plan: Plan
    keys: RunKeys  # the run's (resolved once by the job: `protection.resolve.run_keys`)
    gates: GateHolds | None = None
    hooks: Hooks | None = None
    step_prefix: str = ""
    lease: Hold | None = None  # the job's own lock hold (its element's, or its undo's)
    owner: str | None = None  # a job never holds the run's lock: its slot writes are unfenced

    @property
    def slots(self) -> Slots:
        """The run's storage (an element job's map is a step of the run)."""
        return config.current_storage()


def gated_child(node: Node) -> bool:
    """Whether the map's element reactor takes gates (its own, or its steps')."""
    child = node.spec.child
    if child is None:
        return False
    plan = plan_for(child)
    return bool(child.gates) or any(n.spec.gates or (n.spec.child is not None
                                                     and n.spec.child.gates)
                                    for n in plan.nodes.values())


def context(ex: Scope, node: Node, index: int, attempt: int) -> StepContext:
    """An element's step context: its idempotency key `<run>:<map>:<index>` is the same on
    every retry and re-run of that element (a map nested in an element reactor's element:
    `<run>:<outer map>:<index>.<map>:<index>`)."""
    reactor = ex.plan.levels[node.level].reactor.name
    key = ex.step_prefix + node.key
    return StepContext(ex.run_id, reactor, key, attempt, f"{ex.run_id}:{element_key(key, index)}")


def source_items(ex: Execution, node: Node, value: Any) -> list[Any] | tuple[Any, ...]:
    """The mapped list, checked: anything but a list or tuple fails the map step."""
    if not isinstance(value, list | tuple):
        options = node.spec.map
        assert options is not None
        raise ArgumentError(
            f"map step {node.key!r} maps over {options.over!r}, which is a "
            f"{type(value).__name__} in this run, not a list or tuple",
            run_id=ex.run_id, step=node.key)
    return value


def read_source(ex: Execution, node: Node) -> Any:
    """The value of the map's `over` (an input field, or an earlier step's result that is not
    itself a map: see `map_reads.source_of` for that case), read as a parameter reads it: an
    async unit's value once it finished (`AsyncUnitFailed` if it failed)."""
    options = node.spec.map
    assert options is not None
    if not options.over_is_step:
        return read_input(ex.level_inputs[node.level], options.over)
    over = join(node.level, options.over)
    if ex.plan.nodes[over].kind in UNIT_KINDS:
        return unit_argument(ex, node, options.over, over, False)
    return ex.value_of(over)


async def source_of(ex: Execution, node: Node) -> list[Any] | tuple[Any, ...]:
    """The list a map maps over (loaded from storage when it is another map's results)."""
    options = node.spec.map
    assert options is not None
    over = join(node.level, options.over)
    if options.over_is_step and ex.plan.nodes[over].kind is StepKind.MAP:
        return await load_list(ex.slots, ex.keys, ex.plan.nodes[over],
                               element_count(ex, over), MapRead.VALUES)
    return source_items(ex, node, read_source(ex, node))


def encode(ex: Scope, node: Node, index: int, result: Any) -> msgspec.Raw:
    """An element's result encoded, after checking it decodes with the element annotation."""
    where = element_key(node.key, index)
    try:
        clear = records.encode(result)
        raw = ex.keys.seal_raw(fields.element_result(node.key, index), clear)
    except (TypeError, OverflowError) as exc:
        raise SerializationError(
            f"map {node.key!r}, element {index}: returned a {type(result).__name__}, which "
            f"cannot be stored: {describe(exc)}", run_id=ex.run_id, step=where,
            type_name=type(result).__name__, cause=exc) from exc
    try:
        node.decoder.decode(clear)
    except msgspec.ValidationError as exc:
        raise SerializationError(
            f"map {node.key!r}, element {index}: returned a {type(result).__name__} that does "
            f"not match the annotation: {describe(exc)}", run_id=ex.run_id, step=where,
            type_name=type(result).__name__, cause=exc) from exc
    return raw


async def call_element(ex: Scope, node: Node, base: dict[str, Any], index: int,
                       item: Any) -> tuple[ElementRecord, BaseException | None]:
    """Run one element of a map's function to its outcome (retries, timeout), with the live
    exception when it failed (an element reactor's: `children.call_any_element`); a failed
    element's compensate runs here, once. Cancellation of the run propagates."""
    spec = node.spec
    options = spec.map
    assert options is not None
    kwargs = dict(base)
    kwargs[options.element] = item
    assert spec.child is None  # an element reactor's: `children.call_any_element`
    retry, timeout, fn = spec.retry, spec.timeout, spec.fn
    context_name = node.context_name
    attempt = 0
    while True:
        await ensure_live(ex.lease)  # a lost lock starts no element, nor a further attempt
        attempt += 1
        if context_name is not None:
            kwargs[context_name] = context(ex, node, index, attempt)
        try:
            if timeout is not None:
                with clock.move_on_after(timeout) as scope:
                    result = await fn(**kwargs)
                if scope.cancelled_caught:
                    raise StepTimeout(ex.run_id, element_key(node.key, index), timeout)
            else:
                result = await fn(**kwargs)
            return ElementRecord(StepStatus.COMPLETED, attempt,
                                 encode(ex, node, index, result)), None
        except Exception as exc:
            error: BaseException = exc
        except anyio.get_cancelled_exc_class() as exc:
            if scope_cancelled():
                raise
            error = exc
        if (retry is not None and not isinstance(error, _NOT_RETRIED)
                and retry.should_retry(error, attempt)):
            delay = retry.delay(attempt)
            if delay > 0:
                await clock.sleep(delay, why=f"retry backoff of element {index} of map "
                                             f"{node.key!r}")
            continue
        return await _failed(ex, node, index, kwargs, attempt, error), error


async def _failed(ex: Scope, node: Node, index: int, kwargs: dict[str, Any], attempt: int,
                  error: BaseException) -> ElementRecord:
    if log.isEnabledFor(logging.INFO):
        log.info("reactorflow.map.element_failed run_id=%s step=%s index=%d error=%s",
                 ex.run_id, node.key, index, summary(error))
    record = ElementRecord(StepStatus.FAILED, attempt, error=ErrorRecord.from_exception(error))
    handler = node.spec.compensate
    if handler is None:
        return record
    arguments = {name: kwargs[name] for name in handler.names if name in kwargs}
    if handler.context_name is not None:
        arguments[handler.context_name] = context(ex, node, index, attempt)
    # a lost lock starts no compensate either: a process paused past its element's lock (a
    # zombie) whose body failed once it went on finds the element re-run and compensated by
    # the taker, and must not compensate it again
    await ensure_live(ex.lease)
    try:
        await handler.fn(error, **arguments)
    except Exception as exc:
        log.warning("reactorflow.compensate.failed run_id=%s step=%s index=%d error=%s",
                    ex.run_id, node.key, index, summary(exc))
        record.rollback_error = ErrorRecord.from_exception(exc)
    return record
