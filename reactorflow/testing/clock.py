"""`FakeClock`: time that moves only when a test says so.

Installed with `reactorflow.clock.use(...)` (the `Environment` does it), it makes every engine
wait — retry backoff, snoozes, step timeouts, interrupt and wait deadlines, lock TTLs on
`MemoryStorage`, delayed jobs — wait for fake time. `advance(seconds)` moves the time forward:

1. take the earliest registered wait due within the advance, or the earliest timer in storage
   (`on_timers`: the environment's hook, which reads its storage), whichever comes first (if
   none, jump to the end);
2. call each jump listener with (from, to) (the environment extends the locks that live
   executions hold, as their lock keeper would have in real time);
3. set the time to that wait's due time, wake every wait then due, and fire the storage timers
   then due (the environment enqueues each run's resume on its queue);
4. let the woken work run until it waits again (`settle`), then go on from 1.

Waits are attributed to the *work* they belong to: the job queue of the environment runs each
job under a `Work` (`current_work`), and a wait for time that such a job enters (a `sleep`, or
a `wait_signal` of `reactorflow.clock`: a deadline with a reason) is noted on it, with what it
waits for, since when and until when. A job all of whose noted waits are open is *waiting for
the clock*: settling does not wait for it (it would wait for ever), and `drain()` names it when
nothing else is left.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import anyio
import anyio.lowlevel

from reactorflow import clock as rf_clock

SETTLE_ROUNDS = 20  # event-loop turns given to woken work before the clock looks again

Listener = Callable[[float, float], Awaitable[None]]


class Wait:
    """One open wait for fake time of a piece of work: what for, since and until when."""

    __slots__ = ("due", "since", "why")

    def __init__(self, why: str, since: float, due: float) -> None:
        self.why = why
        self.since = since
        self.due = due

    def describe(self, now: float) -> str:
        """E.g. "retry backoff of step 'x' (attempt 2 of 3): since 1.5s ago, due in 58.5s"."""
        return f"{self.why}: since {now - self.since:g}s ago, due in {self.due - now:g}s"


class Work:
    """A piece of work the environment runs (a job), and its open waits for fake time."""

    __slots__ = ("label", "waits")

    def __init__(self, label: str) -> None:
        self.label = label
        self.waits: list[Wait] = []

    @property
    def waiting(self) -> bool:
        """Whether it waits for the fake clock (and so for nothing else that runs)."""
        return bool(self.waits)


current_work: contextvars.ContextVar[Work | None] = contextvars.ContextVar(
    "reactorflow_testing_work", default=None)
"""The work the running code belongs to (set by the environment's queue for each job)."""


class _Timer:
    __slots__ = ("callback", "cancelled", "due", "loop", "wait", "work")

    def __init__(self, due: float, loop: asyncio.AbstractEventLoop,
                 callback: Callable[[], None]) -> None:
        self.due = due
        self.loop = loop
        self.callback = callback
        self.cancelled = False
        self.work: Work | None = None
        self.wait: Wait | None = None


class FakeClock:
    """A clock whose time moves only on `advance()` (see the module)."""

    def __init__(self, start: float | None = None) -> None:
        """Args:
            start: epoch seconds to start at (default: the real time now).
        """
        self._now = time.time() if start is None else float(start)
        self._mutex = threading.Lock()
        self._timers: list[tuple[float, int, _Timer]] = []
        self._seq = itertools.count()
        self._listeners: list[Listener] = []
        self._timer_hooks: list[tuple[Callable[[], Awaitable[float | None]],
                                      Callable[[], Awaitable[object]]]] = []
        self._settlers: list[Callable[[], Awaitable[None]]] = []
        self._watchers: list[Callable[[], None]] = []

    # -- the Clock protocol --------------------------------------------------------------------

    def now(self) -> float:
        """Epoch seconds of fake time."""
        return self._now

    def monotonic(self) -> float:
        """The same fake time (it never goes back)."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Return once the fake time has moved `seconds` on (a checkpoint when `<= 0`)."""
        if seconds <= 0:
            await anyio.lowlevel.checkpoint()
            return
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        timer = self._add(seconds, loop, wake, why=rf_clock.waiting_for() or "a sleep")
        try:
            await woken
        finally:
            self._close(timer)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[anyio.CancelScope]:
        """A cancel scope cancelled once the fake time has moved `seconds` on."""
        return self._deadline(seconds)

    @contextmanager
    def _deadline(self, seconds: float | None) -> Iterator[anyio.CancelScope]:
        with anyio.CancelScope() as scope:
            if seconds is None:
                yield scope
                return
            if seconds <= 0:
                scope.cancel()
                yield scope
                return
            timer = self._add(seconds, asyncio.get_running_loop(), scope.cancel,
                              why=rf_clock.waiting_for())  # a deadline of a wait, or of work
            try:
                yield scope
            finally:
                self._close(timer)

    # -- driving it ----------------------------------------------------------------------------

    async def advance(self, seconds: float) -> None:
        """Move the fake time `seconds` forward, waking every wait that comes due on the way,
        in due order, each woken wait's work run until it waits again.

        Args:
            seconds: how far (>= 0).

        Raises:
            ValueError: `seconds` is negative (time never goes back).
        """
        if seconds < 0:
            raise ValueError(f"clock.advance({seconds!r}): time never goes back; give seconds "
                             ">= 0")
        target = self._now + seconds
        await self._settle()
        while True:
            due = self._next_due(target)
            for next_timer, _ in self._timer_hooks:
                timer = await next_timer()
                if timer is not None and timer <= target and (due is None or timer < due):
                    due = max(timer, self._now)
            step_to = target if due is None else due
            await self._jump(step_to)
            self._fire(step_to)
            for _, fire in self._timer_hooks:
                await fire()
            await self._settle()
            if due is None:
                return

    async def advance_to(self, when: float) -> None:
        """Move the fake time forward to epoch second `when` (see `advance`)."""
        await self.advance(max(0.0, when - self._now))

    def pending(self) -> list[float]:
        """The due times of the waits registered now, earliest first (for assertions)."""
        with self._mutex:
            return sorted(due for due, _, timer in self._timers if not timer.cancelled)

    def on_timers(self, next_timer: Callable[[], Awaitable[float | None]],
                  fire: Callable[[], Awaitable[object]]) -> Callable[[], None]:
        """Stop `advance` at the storage timers too: `await next_timer()` says when the earliest
        falls due, `await fire()` fires those due now (the environment's hook); returns a
        function that removes the hook."""
        hook = (next_timer, fire)
        self._timer_hooks.append(hook)
        return lambda: self._timer_hooks.remove(hook)

    def on_jump(self, listener: Listener) -> Callable[[], None]:
        """Call `await listener(from, to)` before each jump of the time; returns a function
        that removes the listener."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def on_wait_change(self, watcher: Callable[[], None]) -> Callable[[], None]:
        """Call `watcher()` whenever a piece of work begins or ends a wait for fake time (the
        environment's queue watches its jobs); returns a function that removes it."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher)

    def on_settle(self, settler: Callable[[], Awaitable[None]]) -> Callable[[], None]:
        """Await `settler()` after each wake-up, to let woken work run to its next wait (the
        environment waits for its queue to go idle); returns a function that removes it."""
        self._settlers.append(settler)
        return lambda: self._settlers.remove(settler)

    # -- inside --------------------------------------------------------------------------------

    def _add(self, seconds: float, loop: asyncio.AbstractEventLoop,
             callback: Callable[[], None], *, why: str = "") -> _Timer:
        timer = _Timer(self._now + seconds, loop, callback)
        work = current_work.get()
        if why and work is not None:  # a wait for time of a job: noted on it
            timer.work, timer.wait = work, Wait(why, self._now, timer.due)
            work.waits.append(timer.wait)
            self._changed()
        with self._mutex:
            heapq.heappush(self._timers, (timer.due, next(self._seq), timer))
        return timer

    def _close(self, timer: _Timer) -> None:
        """The timer's wait is over (it fired, or the waiting code went on)."""
        timer.cancelled = True
        work, wait = timer.work, timer.wait
        if work is not None and wait is not None:
            timer.work = timer.wait = None
            if wait in work.waits:
                work.waits.remove(wait)
            self._changed()

    def _changed(self) -> None:
        for watcher in list(self._watchers):
            watcher()

    def _next_due(self, target: float) -> float | None:
        with self._mutex:
            while self._timers and self._timers[0][2].cancelled:
                heapq.heappop(self._timers)
            if self._timers and self._timers[0][0] <= target:
                return self._timers[0][0]
            return None

    async def _jump(self, to: float) -> None:
        if to > self._now:
            for listener in list(self._listeners):
                await listener(self._now, to)
        self._now = max(self._now, to)

    def _fire(self, now: float) -> None:
        due: list[_Timer] = []
        with self._mutex:
            while self._timers and self._timers[0][0] <= now:
                timer = heapq.heappop(self._timers)[2]
                if not timer.cancelled:
                    due.append(timer)
        for timer in due:
            self._close(timer)  # its work is no longer waiting: settling waits for it again
            _call_on(timer.loop, timer.callback)

    async def _settle(self) -> None:
        for _ in range(SETTLE_ROUNDS):
            await anyio.lowlevel.checkpoint()
        for settler in list(self._settlers):
            await settler()


def _call_on(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        callback()
    elif not loop.is_closed():
        loop.call_soon_threadsafe(callback)
