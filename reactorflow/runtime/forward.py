"""Driving a run forward: ready steps run concurrently in the run's one anyio task group.

Steps run on a small pool of runner tasks inside that group. A runner takes the next ready step;
before it starts one, it makes sure a spare runner exists while more steps are ready, so a step
that suspends never holds back the others, and a step that finishes without suspending costs no
task spawn. `max_concurrency` caps the number of runners.

When a step fails, nothing new starts; steps in flight finish (and are checkpointed), then the
caller rolls back. A halt stops the same way without rollback. A cancel request read back from
a checkpoint stops at the next step boundary.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from reactorflow import records
from reactorflow.definition.graph import Node
from reactorflow.definition.params import MISSING
from reactorflow.definition.specs import StepKind
from reactorflow.errors import (
    ArgumentError,
    AsyncWaitTimeout,
    CorrelationConflict,
    InputValidationError,
    SerializationError,
)
from reactorflow.records import ErrorRecord, StepRecord
from reactorflow.runtime.execution import event
from reactorflow.runtime.inputs import validate_inputs
from reactorflow.runtime.pausing import claimed_payload, waiting_record
from reactorflow.runtime.stepcall import (
    call_step,
    evaluate_when,
    resolve_arguments,
    skip_reason,
)
from reactorflow.runtime.units import await_unit
from reactorflow.runtime.units import dispatch as dispatch_unit
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from reactorflow.runtime.execution import Execution

log = logging.getLogger("reactorflow.run")
_SETTLED = frozenset({StepStatus.COMPLETED, StepStatus.SKIPPED})
UNIT_KINDS = (StepKind.ASYNC_STEP, StepKind.ASYNC_REACTOR)


@dataclass(slots=True)
class Verdict:
    """How a forward drive ended."""

    status: str  # completed, paused, failed, halted, cancelled, handoff
    failed: list[str] = field(default_factory=list)  # keys of failed steps, in failure order
    errors: dict[str, BaseException] = field(default_factory=dict)
    halt_reason: str | None = None
    waiting: list[str] = field(default_factory=list)


class Forward:
    def __init__(self, ex: Execution, *, max_concurrency: int | None = None) -> None:
        self.ex = ex
        self.plan = ex.plan
        self.queue: deque[str] = deque()
        self.missing: dict[str, int] = {}
        self.unsettled: dict[str, int] = {}
        self.waiting: dict[str, None] = {}
        self.in_flight: set[str] = set()
        self.verdict = Verdict("completed")
        self.stopping = False
        self.fatal: BaseException | None = None
        self.limit = max_concurrency if max_concurrency is not None else math.inf
        handoff = self.plan.reactor.handoff
        self.handoff = None if ex.state.handed_off else handoff
        self.handing_off = False
        self.runners = 0
        self.idle = 0
        self.tg: TaskGroup | None = None

    # -- the drive -----------------------------------------------------------------------------

    async def run(self) -> Verdict:
        self._open_level("")
        if self.queue and not self.stopping:
            async with anyio.create_task_group() as tg:
                self.tg = tg
                self._dispatch()
        self.tg = None
        if self.fatal is not None:
            raise self.fatal
        verdict = self.verdict
        control = self.ex.control
        if verdict.status == "completed":
            if control is not None and self.stopping:
                verdict.status = "cancelled" if control.kind == "cancel" else "failed"
            elif self.handing_off:
                verdict.status = "handoff"
            elif self.waiting:
                verdict.status = "paused"
        verdict.waiting = list(self.waiting)
        return verdict

    def _open_level(self, level_key: str) -> None:
        """Register a level's steps: count what each waits for, queue what is ready."""
        ex = self.ex
        level = self.plan.levels[level_key]
        unsettled = 0
        for key in level.node_keys:
            if self._settled(key):
                continue
            status = ex.status_of(key)
            unsettled += 1
            node = self.plan.nodes[key]
            if node.kind is StepKind.COMPOSE and status == StepStatus.RUNNING:
                self._open_level(key)
                continue
            if status == StepStatus.WAITING and key not in ex.claims:
                self.waiting[key] = None
                continue
            missing = sum(1 for dep in node.deps if not self._settled(dep))
            self.missing[key] = missing
            if missing == 0:
                self.queue.append(key)
        self.unsettled[level_key] = unsettled
        if unsettled == 0 and level_key:
            self.queue.append(level_key)  # an empty child: its compose step completes at once

    def _settled(self, key: str) -> bool:
        """Done as far as scheduling goes: completed or skipped, or an async unit dispatched
        (its readers wait for its result themselves)."""
        status = self.ex.status_of(key)
        if status in _SETTLED:
            return True
        return self.plan.nodes[key].kind in UNIT_KINDS and status != StepStatus.PENDING

    # -- runners -------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        if self.queue and self.idle == 0 and not self.stopping:
            self._spawn()

    def _spawn(self) -> None:
        if self.runners >= self.limit or self.tg is None:
            return
        self.runners += 1
        self.idle += 1
        self.tg.start_soon(self._runner)

    async def _runner(self) -> None:
        try:
            while self.queue and not self.stopping:
                key = self.queue.popleft()
                self.idle -= 1
                if self.queue and self.idle == 0:
                    self._spawn()
                try:
                    await self._execute(key)
                finally:
                    self.idle += 1
        finally:
            self.runners -= 1
            self.idle -= 1

    def _stop(self) -> None:
        self.stopping = True
        self.queue.clear()

    # -- one step ------------------------------------------------------------------------------

    async def _execute(self, key: str) -> None:
        ex = self.ex
        node = self.plan.nodes[key]
        self.in_flight.add(key)
        cut_off = False
        try:
            reason = skip_reason(ex, node) if node.deps else None
            if reason is not None:
                await self._finish(node, StepRecord(StepStatus.SKIPPED, finished_at=time.time()),
                                   [event("step.skipped", key, detail=reason)])
            elif self.handoff == ("before", key) and not node.level:
                self._hand_off()
            elif node.kind is StepKind.INTERRUPT and key not in ex.claims:
                await self._wait_for_payload(node)
            elif node.unit_deps and not await self._units_ready(node):
                return
            elif node.kind is StepKind.COMPOSE:
                await self._compose(node)
            elif node.kind in UNIT_KINDS:
                await self._dispatch_unit(node)
            else:
                await self._step(node)
        except anyio.get_cancelled_exc_class():
            cut_off = True
            raise
        except BaseException as exc:  # storage failure, KeyboardInterrupt, SystemExit ...
            cut_off = True
            if self.fatal is None:
                self.fatal = exc
            self._stop()
            if self.tg is not None:
                self.tg.cancel_scope.cancel()
        finally:
            if not cut_off:
                self.in_flight.discard(key)

    async def _step(self, node: Node) -> None:
        ex = self.ex
        payload: Any = MISSING
        if node.kind is StepKind.INTERRUPT:
            payload = self._claimed_payload(node)
            if payload is _UNREADABLE:
                return
        out = await call_step(ex, node, payload)
        if out.status == StepStatus.COMPLETED:
            ex.values[node.key] = out.value
            done = StepRecord(StepStatus.COMPLETED, out.attempts, out.started_at, out.finished_at,
                              out.raw, seq=ex.next_seq())
            if node.kind is StepKind.INTERRUPT:
                record = ex.record(node.key)
                done.deadline = record.deadline
                done.correlation_id = record.correlation_id
                out.events.insert(0, event("interrupt.resumed", node.key))
            await self._finish(node, done, out.events)
        elif out.status == StepStatus.SKIPPED:
            await self._finish(node, StepRecord(StepStatus.SKIPPED, finished_at=time.time()),
                               out.events)
        elif out.status == "halted":
            halted = StepRecord(StepStatus.HALTED, out.attempts, out.started_at, out.finished_at,
                                error=ErrorRecord("Halt", str(out.error)))
            ex.records[node.key] = halted
            self.verdict.status = "halted"
            self.verdict.halt_reason = getattr(out.error, "reason", "")
            self._stop()
            await ex.checkpoint(node.key, halted, out.events)
        else:
            assert out.error is not None
            self._fail(node, out.error, out.body_started, out.attempts, out.started_at,
                       out.finished_at)
            await ex.checkpoint(node.key, ex.records[node.key], out.events)

    def _fail(self, node: Node, error: BaseException, body_started: bool, attempts: int = 0,
              started_at: float | None = None, finished_at: float | None = None) -> None:
        """Record a step failure in memory and stop starting new steps."""
        ex = self.ex
        ex.records[node.key] = StepRecord(
            StepStatus.FAILED, attempts, started_at, finished_at or time.time(),
            error=ErrorRecord.from_exception(error),
            compensate_pending=body_started and node.spec.compensate is not None,
        )
        if self.verdict.status not in ("failed", "halted"):
            self.verdict.status = "failed"
        self.verdict.failed.append(node.key)
        self.verdict.errors[node.key] = error
        if log.isEnabledFor(logging.INFO):
            log.info("reactorflow.step.failed run_id=%s step=%s error=%r", ex.run_id, node.key,
                     error)
        self._stop()

    async def _finish(self, node: Node, record: StepRecord, events: list[Any]) -> None:
        """Checkpoint a completed or skipped step, then release what waited for it."""
        ex = self.ex
        await ex.checkpoint(node.key, record, events)
        if ex.control is not None:
            self._stop()
        elif self.handoff == ("after", node.key) and record.status == StepStatus.COMPLETED:
            self._hand_off()
        self._settle(node)

    def _hand_off(self) -> None:
        """The background cut point was reached: stop here; a worker takes the rest."""
        if self.verdict.status == "completed":
            self.handing_off = True
        self._stop()

    # -- async units ---------------------------------------------------------------------------

    async def _units_ready(self, node: Node) -> bool:
        """Wait for the async units this step reads; False if that failed the step."""
        for dep in node.unit_deps:
            try:
                await await_unit(self.ex, node, dep)
            except AsyncWaitTimeout as exc:
                self._fail(node, exc, body_started=False)
                await self.ex.checkpoint(node.key, self.ex.records[node.key],
                                         [event("step.failed", node.key, detail=str(exc))])
                return False
        return True

    async def _dispatch_unit(self, node: Node) -> None:
        ex = self.ex
        key = node.key
        child_inputs: Any = None
        try:
            kwargs = resolve_arguments(ex, node)
            if node.spec.when is not None and not await evaluate_when(ex, node, kwargs):
                await self._finish(node, StepRecord(StepStatus.SKIPPED, finished_at=time.time()),
                                   [event("step.skipped", key, detail="when= was false")])
                return
            if node.kind is StepKind.ASYNC_REACTOR:
                assert node.spec.child is not None
                child_inputs = validate_inputs(node.spec.child, await node.spec.fn(**kwargs))
        except Exception as exc:
            self._fail(node, exc, body_started=False)
            await ex.checkpoint(key, ex.records[key], [event("step.failed", key,
                                                             detail=repr(exc))])
            return
        await dispatch_unit(ex, node, child_inputs)
        if ex.control is not None:
            self._stop()
        elif self.handoff == ("after", key):
            self._hand_off()
        self._settle(node)

    def _settle(self, node: Node) -> None:
        level = node.level
        self.unsettled[level] -= 1
        for dependent in node.dependents:
            left = self.missing.get(dependent)
            if left is None:
                continue
            left -= 1
            self.missing[dependent] = left
            if left == 0 and not self.stopping:
                self.queue.append(dependent)
        if level and self.unsettled[level] == 0 and not self.stopping:
            self.queue.append(level)  # the child is done: complete its compose step
        # no spawn here: the runner that settled takes the next step itself, and spawns a
        # spare for the rest when it does (see _runner)

    # -- composed children ---------------------------------------------------------------------

    async def _compose(self, node: Node) -> None:
        ex = self.ex
        key = node.key
        record = ex.record(key)
        if record.status == StepStatus.RUNNING:
            await self._complete_compose(node, record)
            return
        started = time.time()
        try:
            kwargs = resolve_arguments(ex, node)
            if node.spec.when is not None and not await evaluate_when(ex, node, kwargs):
                await self._finish(node, StepRecord(StepStatus.SKIPPED, finished_at=time.time()),
                                   [event("step.skipped", key, detail="when= was false")])
                return
            mapped = await node.spec.fn(**kwargs)
            child = self.plan.levels[key].reactor
            child_inputs = validate_inputs(child, mapped)
            raw = records.raw(child_inputs)
        except (ArgumentError, InputValidationError, SerializationError, TypeError) as exc:
            self._fail(node, exc, body_started=False, started_at=started)
            await ex.checkpoint(key, ex.records[key], [event("step.failed", key,
                                                             detail=str(exc))])
            return
        except Exception as exc:
            self._fail(node, exc, body_started=False, started_at=started)
            await ex.checkpoint(key, ex.records[key], [event("step.failed", key,
                                                             detail=repr(exc))])
            return
        ex.level_inputs[key] = self.plan.levels[key].inputs_decoder.decode(raw)
        opened = StepRecord(StepStatus.RUNNING, 1, started, child_inputs=raw)
        await ex.checkpoint(key, opened, [event("compose.started", key)])
        if ex.control is not None:
            self._stop()
            return
        self._open_level(key)  # this runner goes on with the child's first steps

    async def _complete_compose(self, node: Node, record: StepRecord) -> None:
        ex = self.ex
        level = self.plan.levels[node.key]
        value_key = level.value_key
        if value_key is None or ex.status_of(value_key) == StepStatus.SKIPPED:
            raw, value = records.raw(None), None
        else:
            raw = ex.records[value_key].result
            value = node.decoder.decode(raw)
        ex.values[node.key] = value
        done = StepRecord(StepStatus.COMPLETED, record.attempts, record.started_at, time.time(),
                          raw, seq=ex.next_seq(), child_inputs=record.child_inputs)
        await self._finish(node, done, [event("step.completed", node.key)])

    # -- interrupts ----------------------------------------------------------------------------

    def _claimed_payload(self, node: Node) -> Any:
        try:
            return claimed_payload(self.ex, node)
        except SerializationError as exc:
            self._fail(node, exc, body_started=False)
            return _UNREADABLE

    async def _wait_for_payload(self, node: Node) -> None:
        ex = self.ex
        try:
            if node.spec.when is not None and ex.status_of(node.key) != StepStatus.WAITING:
                kwargs = resolve_arguments(ex, node)
                if not await evaluate_when(ex, node, kwargs):
                    await self._finish(node, StepRecord(StepStatus.SKIPPED,
                                                        finished_at=time.time()),
                                       [event("step.skipped", node.key,
                                              detail="when= was false")])
                    return
            waiting = await waiting_record(ex, node)
        except (ArgumentError, CorrelationConflict) as exc:
            self._fail(node, exc, body_started=False)
            await ex.checkpoint(node.key, ex.records[node.key],
                                [event("step.failed", node.key, detail=str(exc))])
            return
        await ex.checkpoint(node.key, waiting, [event("interrupt.waiting", node.key,
                                                      detail=waiting.correlation_id or "")])
        if ex.control is not None:
            self._stop()
        self.waiting[node.key] = None


_UNREADABLE: Any = object()
