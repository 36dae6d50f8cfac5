"""Driving a run forward: ready steps run concurrently in the run's one anyio task group.

`Runners` is the scheduling half of the forward drive (`forward.Forward` runs each kind of
step): each level's dependency counts, the queue of ready steps, and the runners that take them.
A runner takes the next ready step; before it may suspend (a step body that awaits, a write,
a lock extension: `_spare`), it makes sure a spare runner exists while more steps are ready, so
a step that suspends never holds back the others, and steps that finish without suspending cost
no task spawn. The first runner runs in the calling task on a
copy of its context (`trampoline.in_copy`: no spawn, and a context variable a step sets never leaks
into the caller), on its own while one step at a time is ready (a chain: no task group at all);
once two are ready at once, the run's task group opens and the spares are tasks of it.
`max_concurrency` caps the number of runners.

When a step fails, nothing new starts; steps in flight finish (and are checkpointed), then the
caller rolls back. A halt stops the same way without rollback. A control request read back
from a checkpoint (cancel, fail, an operator's pause) stops at the next step boundary.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, assert_never

import anyio
import anyio.lowlevel

from reactorflow.definition.specs import UNIT_KINDS, StepKind
from reactorflow.errors import GateBusy
from reactorflow.records import Control, summary
from reactorflow.runtime.engine.lockkeeper import ensure_live, live_now
from reactorflow.runtime.engine.stepcall import scope_cancelled
from reactorflow.runtime.engine.trampoline import in_copy
from reactorflow.status import ControlKind, StepStatus

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.execution import Execution

_SETTLED = frozenset({StepStatus.COMPLETED, StepStatus.SKIPPED})


class Ending(StrEnum):
    """How a forward drive ended (what `driver.conclude` saves)."""

    COMPLETED = "completed"
    PAUSED = "paused"  # interrupts wait for payloads
    PARKED = "parked"  # steps wait for async units; the run is re-enqueued when they finish
    SNOOZED = "snoozed"  # a step's gate was busy in a worker: the run is put back for later
    FAILED = "failed"
    HALTED = "halted"
    CANCELLED = "cancelled"
    HANDOFF = "handoff"  # the background cut point: a worker takes the rest
    STOPPED = "stopped"  # an operator's pause request: paused until `resume`


def ending_for(control: Control) -> Ending:
    """How a drive stopped at a step boundary by the control request `control` ends."""
    match control.kind:
        case ControlKind.CANCEL:
            return Ending.CANCELLED
        case ControlKind.FAIL:
            return Ending.FAILED
        case ControlKind.PAUSE:
            return Ending.STOPPED
        case _:
            assert_never(control.kind)


@dataclass(slots=True)
class Verdict:
    """How a forward drive ended."""

    status: Ending
    failed: list[str] = field(default_factory=list)  # keys of failed steps, in failure order
    errors: dict[str, BaseException] = field(default_factory=dict)
    halt_reason: str | None = None
    waiting: list[str] = field(default_factory=list)
    parked: dict[str, float] = field(default_factory=dict)  # unit key -> waited on since
    wake_at: float | None = None  # PARKED: when the first retry or sleep is due
    sleeping: dict[str, float] = field(default_factory=dict)  # PARKED: sleep key -> deadline
    snoozed: list[tuple[str, GateBusy]] = field(default_factory=list)  # step key -> busy gate


class Runners:
    """The forward drive's scheduling (see the module); `Forward` runs the steps."""

    def __init__(self, ex: Execution, *, max_concurrency: int | None = None) -> None:
        self.ex = ex
        self.writer = ex.writer  # (bound once: the per-step path reads it)
        self.plan = ex.plan
        self.queue: deque[str] = deque()
        self.missing: dict[str, int] = {}
        self.unsettled: dict[str, int] = {}
        self.waiting: dict[str, None] = {}
        self.parked: dict[str, float] = {}
        self.retrying: dict[str, float] = {}  # step key -> when its next attempt is due
        self.sleeping: dict[str, float] = {}  # sleep step key -> its deadline (`sleeps`)
        self.in_flight: set[str] = set()
        self.verdict = Verdict(Ending.COMPLETED)
        self.stopping = False
        self.fatal: BaseException | None = None
        self.limit = max_concurrency if max_concurrency is not None else math.inf
        handoff = self.plan.reactor.handoff
        self.handoff = None if ex.state.handed_off else handoff
        self.handing_off = False
        self.runners = 0
        self.idle = 0
        self.tg: TaskGroup | None = None
        # a plain step takes the fast path (`_plain`) unless middleware observes steps or a
        # background cut point is set (both are handled on the general path)
        self.fast = not ex.hooks and self.handoff is None
        # the running runner wrote to storage (a checkpoint, which reads a control request
        # back) and its task has not suspended since: a completion may then be kept for a
        # batch (`RunWriter.flush`); False again wherever a runner may suspend or ends
        self.written = False
        # a runner may have suspended (a step body, a write, a lock extension): a cancellation
        # may have come meanwhile (see `run`); set wherever `written` goes False but at a start
        self.suspended = False

    # -- the drive -----------------------------------------------------------------------------

    async def run(self) -> Verdict:
        self._open_level("")
        if self.queue and not self.stopping:
            # the first runner runs in the calling task, on a copy of its context (as a task
            # would: a context variable a step sets never reaches the caller), on its own while
            # one step at a time is ready: no task, no task group, no loop turn
            await self._first_runner()
            grouped = bool(self.queue) and not self.stopping
            if grouped:  # more than one ready at once: in the group
                async with anyio.create_task_group() as tg:
                    self.tg = tg
                    await self._first_runner()  # (spares are tasks of the group)
            # a cancellation that came while a step was shielded (a checkpoint on its way) is
            # seen here, as a task group's wait for its runner tasks would see it; a drive
            # that never suspended (each step done at its body's first send, every write
            # inline) received none, and a request older than it is the caller's to see
            if grouped or self.suspended:
                await anyio.lowlevel.checkpoint_if_cancelled()
        self.tg = None
        if self.fatal is not None:
            raise self.fatal
        verdict = self.verdict
        writer = self.writer
        control = writer.control
        if verdict.status is Ending.COMPLETED:
            if control is not None and self.stopping:
                verdict.status = ending_for(control)
            elif self.handing_off:
                verdict.status = Ending.HANDOFF
            elif verdict.snoozed:
                verdict.status = Ending.SNOOZED
            elif self.parked or self.retrying or self.sleeping:
                verdict.status = Ending.PARKED
                verdict.parked = dict(self.parked)
                verdict.wake_at = min([*self.retrying.values(), *self.sleeping.values()],
                                      default=None)
                verdict.sleeping = dict(self.sleeping)
            elif self.waiting:
                verdict.status = Ending.PAUSED
        if writer.folded and writer.batches and verdict.status is not Ending.COMPLETED:
            await writer.flush()  # (a completion kept for the final save rides in it)
        verdict.waiting = list(self.waiting)
        return verdict

    def _open_level(self, level_key: str) -> None:
        """Register a level's steps: count what each waits for, queue what is ready."""
        ex = self.ex
        nodes = self.plan.nodes
        fresh = not ex.records  # nothing recorded yet: every step is pending, none settled
        unsettled = 0
        for key in self.plan.levels[level_key].node_keys:
            node = nodes[key]
            unsettled += 1
            if fresh:
                missing = len(node.deps)
            else:
                status = ex.status_of(key)
                if status in _SETTLED or (node.kind in UNIT_KINDS
                                          and status != StepStatus.PENDING):
                    unsettled -= 1  # settled (as `_settled` says)
                    continue
                if node.kind is StepKind.COMPOSE and status == StepStatus.RUNNING:
                    self._open_level(key)
                    continue
                if (status == StepStatus.WAITING and node.kind is StepKind.INTERRUPT
                        and key not in ex.claims):  # (a waiting sleep looks at its deadline)
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

    async def _first_runner(self) -> None:
        self.runners += 1
        self.idle += 1
        await in_copy(self._runner())

    def _spare(self) -> None:
        """The running runner may suspend: start a spare runner when steps are ready and no
        runner is idle to take them, so a step that suspends holds back no other (a step that
        completes without suspending needs none: the runner takes the next one itself)."""
        if self.queue and self.idle == 0:
            self._spawn()

    def _spawn(self) -> None:
        if self.runners >= self.limit or self.tg is None:
            return
        self.runners += 1
        self.idle += 1
        self.tg.start_soon(self._runner)

    async def _runner(self) -> None:
        """Take ready steps one after another until none is left (see the module docstring)."""
        queue = self.queue
        nodes = self.plan.nodes
        in_flight = self.in_flight
        ex = self.ex
        writer = self.writer
        self.written = False  # (another task ran before this one)
        try:
            while queue and not self.stopping:
                key = queue.popleft()
                self.idle -= 1
                if queue and self.tg is None and self.idle == 0 and self.runners < self.limit:
                    # a second step is ready: `run` opens the group (its spares are started
                    # only once this runner may suspend: `_spare`)
                    queue.appendleft(key)
                    self.idle += 1
                    return
                node = nodes[key]
                in_flight.add(key)
                try:
                    if not live_now(ex.lease):  # a lost lock starts no step (LockLost: fatal)
                        self._spare()
                        self.suspended = True
                        await ensure_live(ex.lease)
                    if node.plain and self.fast:
                        await self._plain(node)
                    else:
                        await self._before_suspending()
                        await self._one(node)
                except BaseException as exc:
                    await self._raised(node, exc)  # re-raises a cancellation of the run
                else:
                    in_flight.discard(key)
                finally:
                    self.idle += 1
            if writer.folded and writer.batches and self.runners > 1:
                await writer.flush()  # the task group waits for the others: the task suspends
        finally:
            self.written = False
            self.runners -= 1
            self.idle -= 1

    def _stop(self) -> None:
        self.stopping = True
        self.queue.clear()

    async def _raised(self, node: Node, exc: BaseException) -> None:
        """A step's execution raised `exc`. A cancellation that step code raised (its body, a
        when=, a mapping function) fails the step. A cancellation of the run propagates: the
        step stays in flight, cut off (`driver._abort` records it). Anything else (a storage
        failure, KeyboardInterrupt, SystemExit ...) is fatal: nothing new starts, the run's
        task group is cancelled, and `run` raises it; the step stays in flight too."""
        cancelled = anyio.get_cancelled_exc_class()
        if not isinstance(exc, cancelled):
            self._fatal(exc)
            return
        if scope_cancelled():
            raise exc
        try:
            await self._fail_step(node, exc, detail=summary(exc))
        except cancelled:
            raise
        except BaseException as error:
            self._fatal(error)
            return
        self.in_flight.discard(node.key)

    def _fatal(self, error: BaseException) -> None:
        if self.fatal is None:
            self.fatal = error
        self._stop()
        if self.tg is not None:
            self.tg.cancel_scope.cancel()

    def _after_checkpoint(self, node: Node, *, handoff: bool = True) -> None:
        """After a step settled: stop for a control request read back from the checkpoint,
        or at the `background(after=...)` point; release the steps that waited for it."""
        if self.writer.control is not None:
            self._stop()
        elif handoff and self.handoff is not None and self.handoff == ("after", node.key):
            self._hand_off()
        level = node.level
        self.unsettled[level] -= 1
        missing = self.missing
        for dependent in node.dependents:
            left = missing.get(dependent)
            if left is None:
                continue
            left -= 1
            missing[dependent] = left
            if left == 0 and not self.stopping:
                self.queue.append(dependent)
        if level and self.unsettled[level] == 0 and not self.stopping:
            self.queue.append(level)  # the child is done: complete its compose step
        # no spawn here: the runner that settled takes the next step itself, and spawns a
        # spare for the rest when it does (see _runner)

    def _hand_off(self) -> None:
        """The background cut point was reached: stop here; a worker takes the rest."""
        if self.verdict.status is Ending.COMPLETED:
            self.handing_off = True
        self._stop()


    async def _before_suspending(self) -> None:
        """The running runner's task may suspend next: write the kept completions (no other
        task may see storage without them) and note that it may not keep more until it wrote
        again (a control request may come meanwhile), and that a cancellation may come."""
        self._spare()
        writer = self.writer
        if writer.folded and writer.batches:
            await writer.flush()
        self.written = False
        self.suspended = True

    # -- what the drive provides -----------------------------------------------------------------

    async def _plain(self, node: Node) -> None:
        """Run a plain step (`Node.plain`) on the fast path."""
        raise NotImplementedError

    async def _one(self, node: Node) -> None:
        """Run any step."""
        raise NotImplementedError

    async def _fail_step(self, node: Node, error: BaseException, *, detail: str = "") -> None:
        """Record a step failed and stop starting new steps."""
        raise NotImplementedError


def completes_run(forward: Runners, node: Node) -> bool:
    """Whether the completion of `node` completes the run: the last unsettled step of the root,
    nothing else in flight, queued, waiting, parked, retrying or sleeping, no stop, control request,
    hand-off after it, or composed child's gates open. Its record and events are then written by
    the run's final save (`RunWriter.fold`), which a control request that came meanwhile
    refuses (`unless_control`): the step is then checkpointed on its own and the request
    honoured, as at any step boundary. The reactor's own gates ride in that save as in any
    final save: `unless_control` drops them only if the write landed, so a refused save keeps
    them held through the rollback the request may start.

    Always for a run that got a payload (the tail of a `continue_`); for any other run where
    the storage's `save_step` is its own (`@foldable`, `RunWriter.folds`): a `save_step`
    replaced on the storage object (fault injection, a test's slow write, which may watch every
    checkpoint: `tests/runtime/test_checkpoint_shield.py`) or a subclass's override gets every
    step's checkpoint, the last one included.

    Args:
        forward: The drive the step completed in.
        node: The step.
    """
    ex = forward.ex
    writer = forward.writer
    return ((writer.folds or bool(ex.claims)) and not node.level and forward.unsettled[""] == 1
            and len(forward.in_flight) == 1 and not forward.queue and not forward.stopping
            and not forward.waiting and not forward.parked and not forward.retrying
            and not forward.sleeping
            and writer.control is None and forward.handoff != ("after", node.key)
            and not ex.level_entries)
