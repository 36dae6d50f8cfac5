"""The clock seam: every engine read of time and every engine wait goes through one clock.

The engine reads time (`now()` for recorded timestamps and stored deadlines, `monotonic()` for
intervals), waits (`sleep()`: retry backoff, snoozes, re-check polls) and bounds waits
(`move_on_after()`: step timeouts, interrupt and wait deadlines) only through this module. The
default is `RealClock` (the system's clocks and anyio's timers); the test kit installs a fake
clock (`reactorflow.testing.FakeClock`) whose `advance()` moves time and wakes what is due.

The module sits beside `errors.py`, below storage: `MemoryStorage` reads lock and retention
expiry through it, so a lock TTL runs on the same time as the engine that holds the lock.

Places that genuinely need the real clock read it directly and are listed (with the reason) in
`tests/architecture/test_clock.py`: the lock keeper's own thread, network I/O timeouts of the
Redis pub/sub client, the HTTP event stream's keep-alive, and the demo's simulated work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
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


async def sleep(seconds: float) -> None:
    """Sleep `seconds` on the current clock."""
    await _current.sleep(seconds)


def move_on_after(seconds: float | None) -> AbstractContextManager[anyio.CancelScope]:
    """A cancel scope that fires after `seconds` on the current clock (see `Clock`)."""
    return _current.move_on_after(seconds)


async def wait_signal(wait: Callable[[float], Awaitable[bool]], seconds: float) -> bool:
    """Wait for a signal for at most `seconds` on the current clock.

    Args:
        wait: waits for the signal up to the given real seconds; returns whether it came (a
            subscription's `wait`).
        seconds: the longest wait, in clock time. On a fake clock the signal is also waited
            for in real time (a lost signal is re-checked as often as with the real clock),
            and the wait ends early when the fake time passes `seconds`.

    Returns:
        Whether the signal came.
    """
    current_clock = _current
    if current_clock is REAL:
        return await wait(seconds)
    with current_clock.move_on_after(seconds):
        return await wait(seconds)
    return False  # the clock's time passed `seconds` first
