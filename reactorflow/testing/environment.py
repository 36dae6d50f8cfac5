"""`Environment`: a reactorflow world for one test, as an async context manager.

Entering it, in order:

1. remember the settings, the clock and the job queue in use;
2. install a fresh `FakeClock`, a fresh storage (a new `MemoryStorage` unless one is given, e.g.
   a `RedisStorage` on a namespace of its own), and an `EnvironmentQueue` that runs every job
   (dispatched runs, hand-offs, async units, map elements, delayed re-enqueues) on the test's
   event loop;
3. add the crash injector to the configured middleware.

Leaving it cancels the jobs still running or waiting, puts back every replaced step function,
the queue, the clock and the settings, and closes the storage it created. Nothing happens at
import: only entering an `Environment` changes anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import reactorflow as rf
from reactorflow import clock as rf_clock
from reactorflow import config
from reactorflow.definition import bodies, naming, registry
from reactorflow.errors import ConfigurationError
from reactorflow.runtime.engine import job_queue as rf_queue
from reactorflow.runtime.engine.lockkeeper import keeper
from reactorflow.runtime.services import sweeper
from reactorflow.runtime.services.timers import fire_due
from reactorflow.storage.contract.storage import Storage
from reactorflow.testing.clock import FakeClock
from reactorflow.testing.crash import (
    CrashInjector,
    CrashPoint,
    SimulatedCrash,
    SimulatedTickCrash,
    TickCrashPoint,
    When,
)
from reactorflow.testing.queue import EnvironmentQueue

DRAIN_LIMIT = 1000  # jobs one drain() may start before it decides work keeps arriving


@contextmanager
def _armed(points: list[Any], point: object, fired: Callable[[SimulatedCrash], bool]
           ) -> Iterator[None]:
    """Arm `point` (on the injector's list `points`) for the block; the `SimulatedCrash` it
    fired (`fired(crash)`) ends the block quietly; disarmed after."""
    points.append(point)
    try:
        yield
    except SimulatedCrash as crash:
        if not fired(crash):
            raise
    finally:
        if point in points:
            points.remove(point)


class CrashNotReached(AssertionError):
    """A `crash(...)` block ended without its crash point firing."""


class Environment:
    """Fresh storage, a fake clock and an in-test job queue for one test (see the module).

    Use it as `async with Environment() as env:`, or through the `rf_env` / `rf_redis_env`
    pytest fixtures.
    """

    def __init__(self, *, storage: Storage | None = None, start: float | None = None,
                 drain_limit: int = DRAIN_LIMIT, **settings: Any) -> None:
        """Args:
            storage: the storage to use (closed on exit); default a new `MemoryStorage`.
            start: epoch seconds the fake clock starts at (default: the real time now).
            drain_limit: jobs one `drain()` may start (see `drain`).
            settings: further `rf.configure` options for the test (e.g. `lock_ttl=5`,
                `middleware=[...]`, to which the crash injector is added).
        """
        self._given = storage
        self._start = start
        self._settings = settings
        self.drain_limit = drain_limit
        self._undo: list[Callable[[], Any]] = []
        self._entered = False

    @property
    def storage(self) -> Storage:
        """The storage this environment configured."""
        return self._storage

    async def __aenter__(self) -> Environment:
        if self._entered:
            raise ConfigurationError("this Environment is in use already; make another one")
        self._entered = True
        try:
            self._enter()
        except BaseException:
            self._put_back()
            raise
        return self

    def _enter(self) -> None:
        saved = config.settings()
        self._undo.append(lambda: config.restore(saved))
        self._storage = self._given if self._given is not None else rf.MemoryStorage()
        self.clock = FakeClock(self._start)
        previous_clock = rf_clock.use(self.clock)
        self._undo.append(lambda: rf_clock.use(previous_clock))
        self.queue = EnvironmentQueue(asyncio.get_running_loop(), self.clock)
        previous_queue = rf_queue.register(lambda: self.queue)
        self._undo.append(lambda: rf_queue.register(previous_queue))
        self.crashes = CrashInjector(self._storage)
        self.crashes.watch(self._storage)
        options = dict(self._settings)
        middleware = [*options.pop("middleware", saved.middleware), self.crashes]
        config.configure(storage=self._storage, middleware=middleware, **options)
        self._undo.append(self.clock.on_jump(self._extend_live_locks))
        storage = self._storage
        self._undo.append(self.clock.on_timers(storage.next_timer,
                                               lambda: fire_due(storage)))
        self._undo.append(self.clock.on_settle(self.queue.idle))

    def _put_back(self) -> None:
        while self._undo:
            self._undo.pop()()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            await self.queue.aclose()
        finally:
            self._put_back()
            await self._storage.aclose()

    # -- driving -------------------------------------------------------------------------------

    async def drain(self, *, limit: int | None = None) -> None:
        """Run every queued job (dispatched runs, hand-offs, async units, map elements) until
        none is running. Jobs delayed into the future wait for `clock.advance`.

        Args:
            limit: jobs it may start (default `drain_limit`).

        Raises:
            DrainError: more than `limit` jobs started: work keeps arriving.
        """
        await self.queue.drain(self.drain_limit if limit is None else limit)

    @contextmanager
    def override(self, reactor: rf.Reactor, step: str, fn: Callable[..., Any]) -> Iterator[None]:
        """Within the block, run `fn` instead of `step`'s function (its declaration, retries,
        undo and compensate stay).

        Args:
            reactor: the reactor whose runs the replacement applies to.
            step: the step's key in those runs: its name, or the dotted path into a composed
                child (`"ship.book_courier"`: only that use of the child's step is replaced).
            fn: an `async def` with the step's parameters (those of the declaring reactor's
                function, `ctx: rf.StepContext` included when it has one).

        Raises:
            DefinitionError: no step at that key, or `fn` does not fit it (checked like a
                declaration: async, same parameters, same return type if annotated).
        """
        owner, name = bodies.resolve(reactor, step)
        bodies.check_body(owner, name, fn)
        original = bodies.declared(owner, name).fn
        replacement = fn if owner is reactor else self.crashes.body_switch(
            CrashPoint(reactor.name, step, "before"), fn, original)
        previous = bodies.swap_body(owner, name, replacement)
        try:
            yield
        finally:
            bodies.swap_body(owner, name, previous)

    @contextmanager
    def undeclared(self, *reactors: rf.Reactor) -> Iterator[None]:
        """Within the block, this process does not declare `reactors`, as a process deployed
        without their module would not: a stored run of one's version is migrated along a
        declared path (`@newer.migrate(from_version=N)`) or refused with
        `rf.DefinitionChanged`. For testing a migration on a run the old version stored (see
        [Deploying changes](deploying.md#testing-a-migration)).

        Args:
            reactors: the old versions to hide.
        """
        for reactor in reactors:
            naming.forget(reactor)
        try:
            yield
        finally:
            for reactor in reactors:
                naming.register(reactor)

    @contextmanager
    def crash(self, reactor: rf.Reactor, step: str, *, when: When = "after"
              ) -> Iterator[CrashPoint]:
        """Within the block, the first run of `reactor` that reaches `step` "dies" there:
        `when="before"` its body runs, or `"after"` its result is checkpointed. Storage is left
        as a killed process leaves it (the run `running`, its lock held until `lock_ttl`
        passes); the `SimulatedCrash` raised in the run (e.g. out of `reactor.run(...)`) ends
        the block quietly. Then `recover()` does what the sweeper would.

        Args:
            reactor: the reactor (a child reactor too: then its step crashes wherever it runs,
                in a run of its own or composed into another's).
            step: the step's key in the reactor's runs: its name, or the dotted path into a
                composed child (`"ship.book_courier"`).
            when: "before" or "after".

        Raises:
            ConfigurationError: `when` is neither.
            DefinitionError: no step at that key (the error names the path).
            CrashNotReached: the block ended and no run reached the crash point.
        """
        if when not in ("before", "after"):
            raise ConfigurationError(f"crash(when={when!r}): give 'before' or 'after'",
                                     option="when")
        owner, name = bodies.resolve(reactor, step)
        spec = bodies.declared(owner, name)
        point = CrashPoint(reactor.name, step, when)
        if when == "before":
            previous = bodies.swap_body(owner, name, self.crashes.body_guard(point, spec.fn))
        try:
            with _armed(self.crashes.points, point, lambda crash: crash.run_id in point.fired):
                yield point
        finally:
            if when == "before":
                bodies.swap_body(owner, name, previous)
        if not point.fired:
            raise CrashNotReached(f"no run of reactor {reactor.name!r} reached step {step!r} "
                                  f"({when}) inside the crash block")

    @contextmanager
    def crash_tick(self, reactor: rf.Reactor, schedule: str | int = 0
                   ) -> Iterator[TickCrashPoint]:
        """Within the block, the first `rf.schedule_once()` pass that claims a tick of the
        reactor's schedule "dies" right after the claim (the cursor moved and the tick pending
        under its lease, in storage), before starting the run; the `SimulatedTickCrash` it
        raises ends the block quietly. Advance the clock past `lock_ttl` and the next
        `rf.schedule_once()` starts the tick's run.

        Args:
            reactor: the reactor.
            schedule: the schedule's name or index among the reactor's.

        Raises:
            CrashNotReached: the block ended and no pass claimed a tick of the schedule.
        """
        point = TickCrashPoint(f"{reactor.name}:{schedule}")
        with _armed(self.crashes.tick_points, point, lambda crash: isinstance(
                crash, SimulatedTickCrash) and crash.tick in point.fired):
            yield point
        if not point.fired:
            raise CrashNotReached(f"no scheduler pass claimed a tick of schedule "
                                  f"{point.schedule!r} inside the crash_tick block")

    async def recover(self) -> list[rf.Run]:
        """Do what the sweeper does after a crash: let the fake clock pass the lock TTL and the
        stall timeout, sweep once, and drain the queue.

        Returns:
            The runs crashed since the last `recover()` and the runs the sweep recovered, as
            they are after the drain (a crashed run may be taken on by one of its own jobs
            that comes due while the clock passes the TTL, before the sweep looks: it is
            returned all the same).
        """
        settings = config.settings()
        crashed = list(self.crashes.dead)
        await self.clock.advance(max(settings.lock_ttl, settings.stall_timeout) + 1)
        await self.crashes.bury()  # on Redis a lock's TTL runs in Redis' own time
        report = await sweeper.sweep_once()
        await self.drain()
        return [await self._get(run_id) for run_id in dict.fromkeys([*crashed,
                                                                     *report.recovered])]

    async def _get(self, run_id: str) -> rf.Run:
        head = await self._storage.load_head(run_id)
        reactor = registry.lookup(head.reactor) if head is not None else None
        if reactor is None:
            raise ConfigurationError(f"run {run_id} was recovered but its reactor is not "
                                     "imported in this process", option="reactor")
        return await reactor.get(run_id)

    async def _extend_live_locks(self, now: float, to: float) -> None:
        """Before the fake time jumps, extend the locks live executions hold past the jump,
        as their lock keeper would have while the time passed."""
        for hold in keeper.holds():
            if hold.released or hold.releasing:
                continue
            await hold.storage.extend_lock(hold.run_id, hold.owner, hold.ttl + (to - now))

