"""A process's service loop on a thread of its own: the timer firer, the heartbeat and the
take-over watch each run one.

A `LoopThread` runs one coroutine on an event loop of its own in a daemon thread, so a step
that blocks the process's other loops never holds it up, and it never keeps the interpreter
from exiting. In order:

1. `start(body)` starts the thread (once: a started one goes on); the thread makes its event
   loop and its wake-up event, then runs `body()`. `start` returns once the loop exists (at
   most 5 s).
2. The body loops while `stopping` is false: it does its work, then `await sleep(seconds)`,
   which returns after that many seconds of real time (a service paces itself as its peers
   and the storage see it), or as soon as `wake()` is called.
3. `wake()` (any thread) ends the current or the next `sleep` at once.
4. `stop(timeout)` sets `stopping`, wakes the body, and joins the thread (at most `timeout`
   seconds): the body's last iteration, and whatever it does after its loop, run first.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable

import anyio


class LoopThread:
    """One service loop of this process (see the module)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self.stopping = False

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, body: Callable[[], Awaitable[None]]) -> bool:
        """Start the thread running `body()`; False if it runs already (nothing changed).

        Args:
            body: The service's loop (see the module for what it may await).
        """
        with self._mutex:
            if self._thread is not None:
                return False
            self.stopping = False
            ready = threading.Event()
            thread = threading.Thread(target=self._serve, args=(body, ready), daemon=True,
                                      name=self.name)
            self._thread = thread
            thread.start()
        ready.wait(5.0)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the body after its current iteration and join the thread.

        Args:
            timeout: Seconds to wait for the thread at most.
        """
        with self._mutex:
            thread = self._thread
            self._thread = None
            self.stopping = True
        if thread is None:
            return
        self.wake()
        thread.join(timeout)

    def wake(self) -> None:
        """End the body's current (or next) `sleep` at once (safe from any thread)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(wake.set)

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of real time, or until `wake()` (in the body only)."""
        assert self._wake is not None
        with anyio.move_on_after(seconds):
            await self._wake.wait()
        self._wake.clear()

    def _serve(self, body: Callable[[], Awaitable[None]], ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            self._loop = loop
            self._wake = asyncio.Event()
            ready.set()
            loop.run_until_complete(body())
        finally:
            self._loop = self._wake = None
            loop.close()
