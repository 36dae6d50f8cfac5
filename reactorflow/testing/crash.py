"""Crash injection: make the process "die" at a step boundary, storage left as a kill leaves it.

A crash point is a (reactor, step, when) triple armed by `Environment.crash`. The step is a
key of the reactor's runs: a step's name, or a dotted path into a composed child
(`"ship.book_courier"`); a point armed on a child reactor itself (`crash(shipping,
"book_courier")`) fires wherever that child's step runs: in a run of the child, or in a run
that composes it (as `ship.book_courier`). `matches` says which (reactor, key) a point hits:

* `when="before"`: the step's body is about to run (its dependencies are checkpointed, it is
  not);
* `when="after"`: the step's result has just been checkpointed (the last step's completion,
  which the run's final save carries, is then written alone first, as a checkpoint of its own:
  the crash leaves the run `running` with that step completed); for a sleep, its deadline has
  just been checkpointed (the run "dies" while it sleeps).

When a point fires, the execution's lock is handed to a dead owner (released by the execution's
owner and taken again, with the full `lock_ttl`, by a token nobody holds), and `SimulatedCrash`
is raised in the execution. The execution's own attempts to write afterwards (the `aborted`
save) raise `SimulatedCrash` again before they reach storage, as they would never happen in a
killed process (and no "abort save failed" traceback is logged for them): storage keeps
the last checkpoint, the run stays `running`, and its lock is held until the TTL passes.
`Environment.recover()` then lets the TTL pass and sweeps.

A tick crash point (`Environment.crash_tick`) names a schedule: the first scheduler pass that
claims one of its ticks "dies" right after the claim's atomic write (the cursor moved, the tick
pending under its lease), before the run is started: `SimulatedTickCrash` is raised out of
`rf.schedule_once()`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from reactorflow import records
from reactorflow.config import settings
from reactorflow.definition import registry
from reactorflow.definition.specs import StepKind
from reactorflow.definition.table import Declared
from reactorflow.middleware import Middleware, RunEvent, StepEvent
from reactorflow.records import StepRecord
from reactorflow.status import StepStatus
from reactorflow.storage.contract.method_marks import foldable, is_foldable
from reactorflow.storage.contract.storage import Storage

When = Literal["before", "after"]
FINISHED = frozenset({StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.SKIPPED})


def _settled(record: StepRecord) -> bool:
    """Where an `after` point fires: the step finished, or a sleep checkpointed its deadline."""
    return record.status in FINISHED or (record.wake_at is not None
                                         and record.status == StepStatus.WAITING)

_step: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar(
    "reactorflow_testing_step", default=None)


class SimulatedCrash(BaseException):
    """The process "died" at a crash point (a BaseException, so step code that catches
    `Exception` cannot swallow it, as it could not stop a kill)."""

    def __init__(self, run_id: str, reactor: str, step: str, when: str) -> None:
        self.run_id = run_id
        self.reactor = reactor
        self.step = step
        self.when = when
        super().__init__(f"simulated crash {when} step {step!r} of reactor {reactor!r} "
                         f"(run {run_id})")


class SimulatedTickCrash(SimulatedCrash):
    """The scheduler "died" after claiming a tick of a schedule, before starting its run."""

    def __init__(self, schedule: str, tick: int) -> None:
        BaseException.__init__(self, f"simulated crash of the scheduler after claiming tick "
                                     f"{tick} (ms) of schedule {schedule!r}")
        self.run_id = ""
        self.reactor, _, self.step = schedule.partition(":")
        self.when = "claimed"
        self.schedule = schedule
        self.tick = tick


@dataclass(slots=True, eq=False)
class TickCrashPoint:
    schedule: str  # "<reactor>:<name or index>"
    fired: list[int] = field(default_factory=list)  # the ticks (ms) it crashed after claiming


@dataclass(slots=True, eq=False)
class CrashPoint:
    reactor: str
    step: str  # a key of the reactor's runs (dotted into composed children)
    when: When
    fired: list[str] = field(default_factory=list)  # run ids it crashed

    def matches(self, root: str | None, key: str) -> bool:
        """Whether the step at `key` of a run of reactor `root` is this point's step."""
        return root is not None and (self.reactor, self.step) in addresses(root, key)


def addresses(root: str, key: str) -> list[tuple[str, str]]:
    """Every (reactor, key) that names the step at `key` of a run of `root`: the root's own
    key, then, for each composed child on the path, the child's key of it
    (`("shop", "ship.book_courier")`, `("shipping", "book_courier")`)."""
    found = [(root, key)]
    reactor: Declared | None = registry.lookup(root)
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        spec = reactor.steps.get(part) if reactor is not None else None
        if spec is None or spec.kind is not StepKind.COMPOSE or spec.child is None:
            break
        reactor = spec.child
        found.append((reactor.name, ".".join(parts[depth + 1:])))
    return found


class CrashInjector(Middleware):
    """Arms crash points and fires them (see the module). Install it as middleware, and wrap
    the storage with `watch`."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.points: list[CrashPoint] = []
        self.tick_points: list[TickCrashPoint] = []
        self.dead: dict[str, str] = {}  # run id -> the dead owner holding its lock
        self.killed: dict[str, SimulatedCrash] = {}  # "<run id> <owner>" of a killed execution
        self.reactors: dict[str, str] = {}  # run id -> reactor name (seen in before_run)

    # -- middleware: where are we ---------------------------------------------------------------

    def before_run(self, event: RunEvent) -> None:
        self.reactors[event.run_id] = event.reactor

    def before_step(self, event: StepEvent) -> None:
        _step.set((event.run_id, event.reactor, event.step))

    # -- firing --------------------------------------------------------------------------------

    def body_guard(self, point: CrashPoint, body: Callable[..., Any]) -> Callable[..., Any]:
        """The step function that fires a `before` point instead of running `body`."""
        async def crash_before(**kwargs: Any) -> Any:
            current = _step.get()
            if (current is None or point not in self.points
                    or not point.matches(current[1], current[2])):
                return await body(**kwargs)
            await self.kill(point, current[0])
            raise AssertionError("unreachable")  # pragma: no cover - kill raises

        return crash_before

    def body_switch(self, point: CrashPoint, fn: Callable[..., Any], body: Callable[..., Any]
                    ) -> Callable[..., Any]:
        """The step function that runs `fn` where `point`'s step runs (a child's step at one
        key of one reactor's runs: an override), and `body` everywhere else."""
        async def switched(**kwargs: Any) -> Any:
            current = _step.get()
            if current is not None and point.matches(current[1], current[2]):
                return await fn(**kwargs)
            return await body(**kwargs)

        return switched

    def watch(self, storage: Storage) -> None:
        """Make `storage`'s checkpoints fire the `after` points armed on this injector."""
        save_step, save_state = storage.save_step, storage.save_state

        async def checked_save_step(run_id: str, owner: str, key: str, record: bytes,
                                    events: Sequence[bytes] = (), *, unit: bool = False
                                    ) -> bytes | None:
            self._still_dead(run_id, owner)
            control = await save_step(run_id, owner, key, record, events, unit=unit)
            await self._after(run_id, {key: record})
            return control

        async def checked_save_state(run_id: str, owner: str, **options: Any) -> bytes | None:
            self._still_dead(run_id, owner)
            steps = options.get("steps") or {}
            if options.get("status") == "completed" and steps:
                # the final save carries the last step's completion (`RunWriter.fold`): a
                # point after that step sees it written alone first, as a checkpoint of its own
                reactor = self.reactors.get(run_id)
                for key, record in steps.items():
                    if any(p.when == "after" and p.matches(reactor, key) for p in self.points):
                        events = [e for e in options.get("events", ())
                                  if records.decode_event(e).step == key]
                        await save_step(run_id, owner, key, record, events)
                        await self._after(run_id, {key: record})
            control = await save_state(run_id, owner, **options)
            await self._after(run_id, steps)
            return control

        if is_foldable(save_step):  # it still only stores (the fold is mapped just above)
            checked_save_step = foldable(checked_save_step)
        storage.save_step = checked_save_step  # type: ignore[method-assign]
        storage.save_state = checked_save_state  # type: ignore[method-assign]
        schedule_advance = storage.schedule_advance

        async def checked_schedule_advance(key: str, expected: int, cursor: int,
                                           lease: int = 0) -> bool:
            moved = await schedule_advance(key, expected, cursor, lease)
            for point in self.tick_points:
                if moved and point.schedule == key:
                    point.fired.append(cursor)
                    self.tick_points.remove(point)  # a point fires once
                    raise SimulatedTickCrash(key, cursor)
            return moved

        storage.schedule_advance = checked_schedule_advance  # type: ignore[method-assign]

    async def _after(self, run_id: str, steps: Mapping[str, bytes]) -> None:
        reactor = self.reactors.get(run_id)
        for point in list(self.points):
            if point.when != "after":
                continue
            for key, record in steps.items():
                if point.matches(reactor, key) and _settled(records.decode_step(record)):
                    await self.kill(point, run_id)

    def _still_dead(self, run_id: str, owner: str) -> None:
        """A killed execution writes nothing more: its write raises its crash again."""
        crash = self.killed.get(f"{run_id} {owner}")
        if crash is not None:
            raise SimulatedCrash(crash.run_id, crash.reactor, crash.step, crash.when)

    async def kill(self, point: CrashPoint, run_id: str) -> None:
        """Hand the run's lock to a dead owner and raise SimulatedCrash."""
        owner = await self.storage.lock_owner(run_id)
        crash = SimulatedCrash(run_id, point.reactor, point.step, point.when)
        if owner is not None:
            self.killed[f"{run_id} {owner}"] = crash
            while await self.storage.release_lock(run_id, owner) > 0:
                pass
            dead = f"dead-{owner}"
            await self.storage.acquire_lock(run_id, dead, settings().lock_ttl)
            self.dead[run_id] = dead
        point.fired.append(run_id)
        self.points.remove(point)  # a point fires once
        raise crash

    async def bury(self) -> list[str]:
        """Let the dead owners' locks go (what their TTL does); returns those run ids."""
        buried = list(self.dead)
        for run_id, dead in self.dead.items():
            while await self.storage.release_lock(run_id, dead) > 0:
                pass
        self.dead.clear()
        return buried
