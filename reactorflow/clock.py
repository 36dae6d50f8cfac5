"""The clock seam: every engine read of time and every engine wait goes through one clock.

The engine reads time (`now()` for recorded timestamps and stored deadlines, `monotonic()` for
intervals), waits (`sleep()`: retry backoff, snoozes; `wait_signal()`: a notification with a
deadline; `poll()`: the interval of a poll for another execution) and bounds waits
(`move_on_after()`: step timeouts, interrupt and wait deadlines) only through this module.

A wait for *time* (`sleep`, `wait_signal`) says what it waits for (`why=`): a fake clock shows
it to a test that is stuck on it (`waiting_for()`). A wait for *another execution* (`poll`,
and a poll's `Patience`) is not a wait for time: on a fake clock it runs in real time as well,
since the other execution works in real time and nobody advances a fake clock for it. The
default is `RealClock` (the system's clocks and anyio's timers); the test kit installs a fake
clock (`reactorflow.testing.FakeClock`) whose `advance()` moves time and wakes what is due.

The module sits beside `errors.py`, below storage: `MemoryStorage` reads lock and retention
expiry through it, so a lock TTL runs on the same time as the engine that holds the lock.

Places that genuinely need the real clock read it directly and are listed (with the reason) in
`tests/architecture/test_clock.py`: the lock keeper's own thread, network I/O timeouts of the
Redis pub/sub client, the HTTP event stream's keep-alive, and the demo's simulated work.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Protocol

import anyio


class Clock(Protocol):
    """What the engine needs from time. Implementations must be safe to read from any thread."""

    def now(self) -> float:
        """Epoch seconds (what is stored: timestamps, deadlines, `due` times)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (intervals and local deadlines)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after `seconds` of this clock's time (a checkpoint when `seconds <= 0`)."""
        ...

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[anyio.CancelScope]:
        """A cancel scope cancelled once `seconds` of this clock's time have passed (never
        when None); `scope.cancelled_caught` says whether it fired."""
        ...


class RealClock:
    """The system's clocks and anyio's timers (the default)."""

    now = staticmethod(time.time)
    monotonic = staticmethod(time.monotonic)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[anyio.CancelScope]:
        return anyio.move_on_after(seconds)


REAL = RealClock()
_mutex = threading.Lock()
_current: Clock = REAL


def current() -> Clock:
    """The clock in use."""
    return _current


def use(clock: Clock | None) -> Clock:
    """Install `clock` process-wide (None: the real clock); returns the one it replaces, so a
    caller can put it back.

    Args:
        clock: the clock the engine reads from now on.
    """
    global _current, now, monotonic
    with _mutex:
        previous, _current = _current, clock or REAL
        now, monotonic = _current.now, _current.monotonic
    return previous


now: Callable[[], float] = REAL.now
"""`clock.now()`: epoch seconds on the current clock (that clock's own `now`, bound by `use`:
the engine reads time on every step, so a read costs no call of its own)."""

monotonic: Callable[[], float] = REAL.monotonic
"""`clock.monotonic()`: monotonic seconds on the current clock (bound by `use`, as `now`)."""


_why: contextvars.ContextVar[str] = contextvars.ContextVar("reactorflow_clock_why", default="")


def waiting_for() -> str:
    """What the wait being entered now waits for ("" outside `sleep`/`wait_signal`): a fake
    clock reads it when the wait registers its timer."""
    return _why.get()


@contextmanager
def _waiting(why: str) -> Iterator[None]:
    token = _why.set(why or "a sleep")
    try:
        yield
    finally:
        _why.reset(token)


async def sleep(seconds: float, *, why: str = "") -> None:
    """Sleep `seconds` on the current clock.

    Args:
        seconds: how long, in clock time.
        why: what the sleep waits for (e.g. "retry backoff of step 'charge'"), for a test on
            a fake clock that is stuck on it.
    """
    if _current is REAL:
        await REAL.sleep(seconds)
        return
    with _waiting(why):
        await _current.sleep(seconds)


async def poll(seconds: float) -> None:
    """Wait one interval of a poll for another execution (a lock it holds, a start it has not
    stored yet): `seconds` of real time, cut short on a fake clock when its time passes them
    first. Not a wait for time: a fake clock does not count it as waiting for `advance`."""
    if _current is REAL:
        await REAL.sleep(seconds)
        return
    with _current.move_on_after(seconds):
        await REAL.sleep(seconds)


class Patience:
    """How long a poll for another execution may go on: `seconds` of the current clock's time,
    and on a fake clock also `seconds` of real time (the other execution works in real time:
    a wait for it must end even when nobody advances the fake clock)."""

    __slots__ = ("_clock_deadline", "_real_deadline")

    def __init__(self, seconds: float) -> None:
        """Args:
            seconds: the longest poll.
        """
        self._clock_deadline = monotonic() + seconds
        self._real_deadline = REAL.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left (<= 0: the patience ran out), the lesser of the two clocks'."""
        left = self._clock_deadline - monotonic()
        if _current is REAL:
            return left
        return min(left, self._real_deadline - REAL.monotonic())

    def exhausted(self) -> bool:
        """Whether the poll must give up now."""
        return self.remaining() <= 0


def move_on_after(seconds: float | None) -> AbstractContextManager[anyio.CancelScope]:
    """A cancel scope that fires after `seconds` on the current clock (see `Clock`)."""
    return _current.move_on_after(seconds)


async def wait_signal(wait: Callable[[float], Awaitable[bool]], seconds: float, *,
                      why: str = "") -> bool:
    """Wait for a signal for at most `seconds` on the current clock.

    Args:
        wait: waits for the signal up to the given real seconds; returns whether it came (a
            subscription's `wait`).
        seconds: the longest wait, in clock time. On a fake clock the signal is also waited
            for in real time (a lost signal is re-checked as often as with the real clock),
            and the wait ends early when the fake time passes `seconds`.
        why: what the wait is for (e.g. "gate 'customer:ada'"), for a test on a fake clock
            that is stuck on it.

    Returns:
        Whether the signal came.
    """
    current_clock = _current
    if current_clock is REAL:
        return await wait(seconds)
    with _waiting(why or "a signal"), current_clock.move_on_after(seconds):
        return await wait(seconds)
    return False  # the clock's time passed `seconds` first


def utc(moment: float) -> datetime:
    """Unix time `moment` as an aware UTC datetime (a sleep's value and `StepState.wake_at`)."""
    return datetime.fromtimestamp(moment, UTC)
