"""Driving a run forward: a plain step's fast path, steps, interrupts, composed children and
async units (each kind dispatched through the step-kind table, `kinds`), run by
`runners.Runners` (the run's task group, its runners and each level's dependency counts; see
there).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, assert_never

from reactorflow import clock, config, records
from reactorflow.definition.graph import Node
from reactorflow.definition.params import MISSING
from reactorflow.definition.specs import StepKind
from reactorflow.errors import (
    ArgumentError,
    AsyncWaitTimeout,
    CorrelationConflict,
    GateBusy,
    InputValidationError,
    SerializationError,
)
from reactorflow.protection import fields
from reactorflow.records import ErrorRecord, Event, StepRecord, describe, summary
from reactorflow.runtime.engine.async_units import await_unit, unit_finished
from reactorflow.runtime.engine.async_units import dispatch as dispatch_unit
from reactorflow.runtime.engine.execution import event
from reactorflow.runtime.engine.inputs import validate_inputs
from reactorflow.runtime.engine.interrupts import claimed_payload, waiting_record
from reactorflow.runtime.engine.map_reads import map_value_raw, prepare_readers
from reactorflow.runtime.engine.runners import Ending, Runners, completes_run
from reactorflow.runtime.engine.stepcall import (
    Outcome,
    StepEnd,
    arguments,
    call_step,
    context_for,
    encode_result,
    evaluate_when,
    halted_record,
    resolve_arguments,
    skip_reason,
)
from reactorflow.runtime.engine.trampoline import go_on
from reactorflow.runtime.gates.levels import close_level, has_gates, open_level
from reactorflow.runtime.gates.scope import Entry
from reactorflow.runtime.gates.step_gates import (
    call_gated,
    deadlock,
    step_needs,
    used_period,
)
from reactorflow.status import EventKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.runtime.engine.execution import Execution

log = logging.getLogger("reactorflow.run")
# members the per-step path reads, looked up once (an enum member's look-up costs ~6x a global's)
_STEP, _INTERRUPT, _COMPLETED = StepKind.STEP, StepKind.INTERRUPT, StepStatus.COMPLETED
_WAITING = StepStatus.WAITING


Handler = Callable[["Forward", Node], Awaitable[None]]
"""How the forward drive runs one kind of step (`kinds.KindHandler.forward`)."""


class Forward(Runners):
    """The forward drive: each kind of step, run by `Runners`; the handler of each kind comes
    from the step-kind table it is given (`kinds.forward_table()`)."""

    def __init__(self, ex: Execution, *, kinds: Mapping[StepKind, Handler],
                 max_concurrency: int | None = None) -> None:
        super().__init__(ex, max_concurrency=max_concurrency)
        self.kinds = kinds

    # -- one step ------------------------------------------------------------------------------

    async def _one(self, node: Node) -> None:
        ex = self.ex
        key = node.key
        reason = skip_reason(ex, node) if node.deps else None
        if reason is None and node.reads_maps:
            # loaded here, where a storage failure is the run's and not the step's (the kinds'
            # handlers below fail the step for what their `arguments` raise): they find it
            await prepare_readers(ex, node)
        if reason is not None:
            await self._skip(node, reason)
        elif self.handoff == ("before", key) and not node.level:
            self._hand_off()
        elif node.unit_deps and not await self._units_ready(node):
            return
        elif node.kind is _STEP:  # the common case first
            await self._step(node)
        else:  # every other kind: its handler in the step-kind table (`kinds`)
            await self.kinds[node.kind](self, node)

    async def _step(self, node: Node) -> None:
        ex = self.ex
        payload: Any = MISSING
        if node.kind is _INTERRUPT:
            try:
                payload = claimed_payload(ex, node)
            except SerializationError as exc:
                await self._fail_step(node, exc, detail=str(exc))
                return
        if node.spec.gates:
            out = await call_gated(ex, node, payload)
        else:
            out = await call_step(ex, node, payload)
        await self._ended(node, out)

    async def _plain(self, node: Node) -> None:
        """The fast path of a plain step (`Node.plain`, no middleware observing): what `_one`,
        `_step`, `call_step` and `_ended` do for it, in one function. A step with a record
        already (e.g. parked between retry attempts) or one to skip takes the general path; a
        first attempt that raised goes on in `call_step` (`failed=`: retried, failed, halted
        or re-raised exactly as there). An interrupt takes it once claimed, its record still
        waiting (the body's first attempt, the payload its argument); else, or when its payload
        no longer decodes, the general path.

        Why it stays (measured side by side in callgrind instructions, 2026-12-02: the same
        program, `benchmarks/_chain_program.py`, on this code and on a copy with the fast path
        switched off): a 10-step chain on MemoryStorage costs 1,058 k instructions per run
        without it and 807 k with it (-24%); earlier, in µs, 145 µs per run against 112. It is
        tested against the general path in `tests/runtime/test_fast_path.py` (each scenario
        both ways, the runs left behind compared)."""
        ex = self.ex
        writer = self.writer
        key = node.key
        payload: Any = MISSING
        waiting: StepRecord | None = None
        if node.kind is _INTERRUPT:
            waiting = ex.records.get(key)
            if (waiting is None or waiting.status != _WAITING or key not in ex.claims
                    or (node.deps and skip_reason(ex, node) is not None)):
                await self._before_suspending()
                await self._one(node)
                return
            try:
                payload = claimed_payload(ex, node)
            except SerializationError:
                await self._before_suspending()
                await self._one(node)  # decoded again there, and recorded failed
                return
        elif key in ex.records or (node.deps and skip_reason(ex, node) is not None):
            await self._before_suspending()
            await self._one(node)
            return
        try:
            kwargs = resolve_arguments(ex, node, payload) if node.spec.params else {}
        except ArgumentError:
            await self._before_suspending()
            await self._step(node)  # resolved again there, and recorded failed
            return
        if node.context_name is not None:
            kwargs[node.context_name] = context_for(ex, node, 1)
        # a step nothing waits for may keep its completion for a batch (`RunWriter.flush`): its
        # body is started by hand, to learn whether it suspends (kept ones land first then). A
        # step with dependents is checkpointed: its fenced write is where an execution whose
        # lock was taken over learns it, before it starts any step that reads it
        keeps = not node.dependents and writer.batches and not node.level and waiting is None
        began = clock.now()
        try:
            body = node.spec.fn(**kwargs)
            if keeps:
                try:
                    suspended = body.send(None)
                except StopIteration as stop:
                    result = stop.value
                else:
                    await self._before_suspending()
                    result = await go_on(body, suspended)
            else:
                self._spare()
                if writer.folded:
                    await writer.flush()  # (as `_before_suspending`)
                self.written, self.suspended = False, True
                result = await body
            raw, value = encode_result(ex, node, result)
        except BaseException as exc:
            error = exc
        else:
            finished = clock.now()
            ex.values[key] = value
            writer.seq = seq = writer.seq + 1  # (as `next_seq`)
            done = StepRecord(_COMPLETED, 1, began, finished, raw, None, seq)
            events = [Event(began, EventKind.STEP_STARTED, key, 1),
                      Event(finished, EventKind.STEP_COMPLETED, key, 1)]
            if waiting is not None:  # (as `_ended` for an interrupt)
                done.deadline = waiting.deadline
                done.correlation_id = waiting.correlation_id
                events.insert(0, event(EventKind.INTERRUPT_RESUMED, key))
            # kept for a batch when nothing waits for it and its task has not suspended since
            # a write read control back; or, as in `_ended`, when it completes the run
            if (keeps and self.written) or ((writer.folds or ex.claims)
                                            and completes_run(self, node)):
                writer.fold(key, done, events)
            else:
                await writer.checkpoint(key, done, events)
                self.written = True
            self._after_checkpoint(node)
            return
        await self._before_suspending()
        await self._ended(node, await call_step(ex, node, payload, failed=(began, error)))

    async def _ended(self, node: Node, out: Outcome) -> None:
        """Record how a call of the step ended (`call_step`'s outcome), and go on from there."""
        ex = self.ex
        writer = self.writer
        match out.status:
            case StepEnd.COMPLETED:
                ex.values[node.key] = out.value
                done = StepRecord(_COMPLETED, out.attempts, out.started_at,
                                  out.finished_at, out.raw, seq=writer.next_seq())
                if node.kind is _INTERRUPT:
                    record = ex.record(node.key)
                    done.deadline = record.deadline
                    done.correlation_id = record.correlation_id
                    out.events.insert(0, event(EventKind.INTERRUPT_RESUMED, node.key))
                if completes_run(self, node):  # its checkpoint rides in the final save
                    writer.fold(node.key, done, out.events)
                else:  # (as `_finish`, inline: the path every completed step takes)
                    await writer.checkpoint(node.key, done, out.events)
                self._after_checkpoint(node)
            case StepEnd.SKIPPED:
                await self._finish(node, StepRecord(StepStatus.SKIPPED, finished_at=clock.now()),
                                   out.events)
            case StepEnd.HALTED:
                halted = halted_record(out)
                ex.records[node.key] = halted
                self.verdict.status = Ending.HALTED
                self.verdict.halt_reason = halted.error.message if halted.error else ""
                self._stop()
                await writer.checkpoint(node.key, halted, out.events)
            case StepEnd.RETRYING:
                await self._retry_later(node, out)
            case StepEnd.SNOOZED:
                assert isinstance(out.error, GateBusy)
                self.verdict.snoozed.append((node.key, out.error))
                self._stop()  # steps in flight finish; the run is put back as it is
            case StepEnd.FAILED:
                assert out.error is not None
                await self._fail_step(node, out.error, events=out.events,
                                      body_started=out.body_started, attempts=out.attempts,
                                      started_at=out.started_at, finished_at=out.finished_at)
            case _:
                assert_never(out.status)

    async def _retry_later(self, node: Node, out: Outcome) -> None:
        """In a worker: the step's next attempt is due later; it stays unsettled, checkpointed
        `running` with the time of that attempt, and the run parks until then."""
        assert out.retry_at is not None
        self.retrying[node.key] = out.retry_at
        if out.error is None:  # parked again before its time: nothing new to write
            return
        record = StepRecord(StepStatus.RUNNING, out.attempts, out.started_at,
                            error=ErrorRecord.from_exception(out.error), retry_at=out.retry_at)
        await self.writer.checkpoint(node.key, record, out.events)

    async def _fail_step(self, node: Node, error: BaseException, *, detail: str = "",
                         events: list[Event] | None = None, body_started: bool = False,
                         attempts: int = 0, started_at: float | None = None,
                         finished_at: float | None = None,
                         error_record: ErrorRecord | None = None) -> None:
        """Fail a step: record it failed, stop starting new steps, and checkpoint it (with
        `events`, else one `step.failed` event with `detail`). Every step failure of the
        forward drive goes through here."""
        ex = self.ex
        record = StepRecord(
            StepStatus.FAILED, attempts, started_at, finished_at or clock.now(),
            error=error_record or ErrorRecord.from_exception(error),
            compensate_pending=body_started and node.spec.compensate is not None,
        )
        ex.records[node.key] = record
        if self.verdict.status not in (Ending.FAILED, Ending.HALTED):
            self.verdict.status = Ending.FAILED
        self.verdict.failed.append(node.key)
        self.verdict.errors[node.key] = error
        if log.isEnabledFor(logging.INFO):
            log.info("reactorflow.step.failed run_id=%s step=%s error=%s", ex.run_id, node.key,
                     summary(error))
        self._stop()
        if events is None:
            events = [event(EventKind.STEP_FAILED, node.key, detail=detail)]
        await self.writer.checkpoint(node.key, record, events)

    async def _skip(self, node: Node, reason: str) -> None:
        await self._finish(node, StepRecord(StepStatus.SKIPPED, finished_at=clock.now()),
                           [event(EventKind.STEP_SKIPPED, node.key, detail=reason)])

    async def _skipped_by_when(self, node: Node, kwargs: dict[str, Any]) -> bool:
        """Apply the step's `when=` (if any); True if it was false and the step was skipped."""
        if node.spec.when is None or await evaluate_when(self.ex, node, kwargs):
            return False
        await self._skip(node, "when= was false")
        return True

    async def _finish(self, node: Node, record: StepRecord, events: list[Any]) -> None:
        """Checkpoint a completed or skipped step, then release what waited for it."""
        await self.writer.checkpoint(node.key, record, events)
        self._after_checkpoint(node, handoff=record.status == StepStatus.COMPLETED)

    # -- async units ---------------------------------------------------------------------------

    async def _units_ready(self, node: Node) -> bool:
        """Make sure the async units this step reads have finished; False when the step cannot
        go on now: it failed (waited too long), or the execution parks until they finish."""
        ex = self.ex
        for dep in node.unit_deps:
            try:
                if ex.mode.parks:
                    since = await self._parked_since(node, dep)
                    if since is not None:
                        self.parked[dep] = since
                        return False
                else:
                    await await_unit(ex, node, dep)
            except AsyncWaitTimeout as exc:
                await self._fail_step(node, exc, detail=str(exc))
                return False
        reason = skip_reason(ex, node)  # a unit it reads was skipped (its period was used)
        if reason is not None:
            await self._skip(node, reason)
            return False
        return True

    async def _parked_since(self, node: Node, dep: str) -> float | None:
        """In a worker: None if unit `dep` has finished (its record is then loaded), else since
        when the run waits for it (`AsyncWaitTimeout` once that is too long)."""
        ex = self.ex
        if await unit_finished(ex, dep, owned=True):
            return None
        now = clock.now()
        since = ex.parked_since.get(dep, now)
        timeout = config.settings().async_wait_timeout
        if now - since >= timeout:
            raise AsyncWaitTimeout(ex.run_id, node.key, dep, timeout)
        return since

    async def _dispatch_unit(self, node: Node) -> None:
        ex = self.ex
        child_inputs: Any = None
        gate_keys: list[str] = []
        try:
            kwargs = await arguments(ex, node)
            if await self._skipped_by_when(node, kwargs):
                return
            used = await used_period(ex, node, kwargs) if node.spec.gates else None
            if used is not None:
                await self._skip(node, f"period {used.key!r} already used")
                return
            if node.kind is StepKind.ASYNC_REACTOR:
                assert node.spec.child is not None
                child_inputs = validate_inputs(node.spec.child, await node.spec.fn(**kwargs),
                                               step=node.key)
            refused = deadlock(ex, node, kwargs, child_inputs)
            if refused is not None:
                raise refused
            if node.kind is StepKind.ASYNC_REACTOR and node.spec.gates:
                gate_keys = [need.key for need in step_needs(ex, node, kwargs)]  # its child's
        except Exception as exc:
            await self._fail_step(node, exc, detail=summary(exc))
            return
        await dispatch_unit(ex, node, child_inputs, gate_keys)
        self._after_checkpoint(node)

    # -- composed children ---------------------------------------------------------------------

    async def _compose(self, node: Node) -> None:
        ex = self.ex
        key = node.key
        record = ex.record(key)
        if record.status == StepStatus.RUNNING:
            await self._complete_compose(node, record)
            return
        started = clock.now()
        try:
            kwargs = await arguments(ex, node)
            if await self._skipped_by_when(node, kwargs):
                return
            mapped = await node.spec.fn(**kwargs)
            child = self.plan.levels[key].reactor
            child_inputs = validate_inputs(child, mapped, step=key)
            clear = raw = records.raw(child_inputs)
            if raw != records.NIL:  # (nil: a child without inputs, told apart by it)
                raw = ex.keys.seal_raw(fields.child_inputs(key), raw)
            if has_gates(node):
                entry = await open_level(ex, node, kwargs, child_inputs)
                if not entry.admitted:
                    await self._refused(node, entry)
                    return
        except (ArgumentError, InputValidationError, SerializationError, TypeError) as exc:
            await self._fail_step(node, exc, detail=describe(exc), started_at=started)
            return
        except Exception as exc:
            await self._fail_step(node, exc, detail=summary(exc), started_at=started)
            return
        ex.level_inputs[key] = self.plan.levels[key].inputs_decoder.decode(clear)
        opened = StepRecord(StepStatus.RUNNING, 1, started, child_inputs=raw, child_opened=True)
        await self.writer.checkpoint(key, opened, [event(EventKind.COMPOSE_STARTED, key)])
        if self.writer.control is not None:
            self._stop()
            return
        self._open_level(key)  # this runner goes on with the child's first steps

    async def _complete_compose(self, node: Node, record: StepRecord) -> None:
        ex = self.ex
        level = self.plan.levels[node.key]
        value_key = level.value_key
        if value_key is None or ex.status_of(value_key) == StepStatus.SKIPPED:
            raw, value = ex.keys.seal_raw(fields.result(node.key), records.encode(None)), None
        else:
            clear = await map_value_raw(ex, value_key) or ex.keys.open(
                fields.result(value_key), ex.records[value_key].result)
            value = node.decoder.decode(clear)
            raw = ex.keys.seal_raw(fields.result(node.key), clear)
        ex.values[node.key] = value
        done = StepRecord(StepStatus.COMPLETED, record.attempts, record.started_at, clock.now(),
                          raw, seq=self.writer.next_seq(), child_inputs=record.child_inputs,
                          child_opened=record.child_opened)
        await self._finish(node, done, [event(EventKind.STEP_COMPLETED, node.key)])
        await close_level(ex, node.key, completed=True)

    async def _refused(self, node: Node, entry: Entry) -> None:
        """A composed child's (or a map's) gates refused it: a used period skips the step; a
        busy gate fails it (in a caller) or snoozes the run (in a worker)."""
        if entry.period_done is not None:
            await self._skip(node, f"period {entry.period_done.key!r} already used")
        elif self.ex.mode.in_worker:
            assert entry.busy is not None
            self.verdict.snoozed.append((node.key, entry.busy))
            self._stop()
        else:
            assert entry.busy is not None
            await self._fail_step(node, entry.busy, detail=str(entry.busy))

    # -- interrupts ----------------------------------------------------------------------------

    async def _wait_for_payload(self, node: Node) -> None:
        """An interrupt reached without a payload: check what it reads (a failed async unit
        fails it now), apply `when=`, then checkpoint it waiting."""
        ex = self.ex
        try:
            if ex.status_of(node.key) != StepStatus.WAITING:
                kwargs = await arguments(ex, node)
                if await self._skipped_by_when(node, kwargs):
                    return
            waiting = await waiting_record(ex, node)
        except (ArgumentError, CorrelationConflict) as exc:
            await self._fail_step(node, exc, detail=str(exc))
            return
        await self.writer.checkpoint(node.key, waiting,
                                     [event(EventKind.INTERRUPT_WAITING, node.key,
                                            detail=waiting.correlation_id or "")])
        if self.writer.control is not None:
            self._stop()
        self.waiting[node.key] = None
