"""A background loop of a process: an asyncio event loop of its own in a daemon thread, with a
wake-up event and a stop handshake (the timer firer and the worker heartbeat are two).

The handshake, in order:

1. `_start` (once; a started loop goes on) resets the stop flag, runs the subclass's
   preparation under the mutex, starts the thread and waits (at most 5 s) until the thread's
   loop and wake-up event exist, so `wake` works as soon as `_start` returns;
2. the thread runs the subclass's `_run` until it returns; `_run` loops while `stopping` is
   false, sleeping with `nap` (which returns early when woken);
3. `stop` sets the stop flag, wakes the loop (if it still runs) and joins the thread.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import threading
from collections.abc import Callable

import anyio


class LoopThread(abc.ABC):
    """The thread, loop and handshake of a background loop (see the module)."""

    def __init__(self, name: str) -> None:
        self._mutex = threading.Lock()
        self._name = name
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False

    @property
    def running(self) -> bool:
        """The loop's thread was started and not stopped."""
        return self._thread is not None

    @property
    def stopping(self) -> bool:
        """`stop` was called: `_run` should return."""
        return self._stopping

    def _start(self, prepare: Callable[[], None] | None = None) -> None:
        """Start the loop in a daemon thread (once), `prepare` called first under the mutex."""
        with self._mutex:
            if self._thread is not None:
                return
            self._stopping = False
            if prepare is not None:
                prepare()
            ready = threading.Event()
            thread = threading.Thread(target=self._serve, args=(ready,), daemon=True,
                                      name=self._name)
            self._thread = thread
            thread.start()
        ready.wait(5.0)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and join its thread (a loop never started: nothing to do).

        Args:
            timeout: How long to wait for the thread, in seconds.
        """
        with self._mutex:
            thread = self._thread
            self._thread = None
            self._stopping = True
        if thread is None:
            return
        self.wake()
        thread.join(timeout)

    def wake(self) -> None:
        """End the loop's current `nap` now (safe from any thread; a no-op when not running)."""
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
            loop.call_soon_threadsafe(wake.set)

    async def nap(self, seconds: float) -> None:
        """Sleep `seconds`, or less when woken (on the loop's own thread)."""
        assert self._wake is not None
        with anyio.move_on_after(seconds):
            await self._wake.wait()
        self._wake.clear()

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            self._loop = loop
            self._wake = asyncio.Event()
            ready.set()
            loop.run_until_complete(self._run())
        finally:
            self._loop = self._wake = None
            loop.close()

    @abc.abstractmethod
    async def _run(self) -> None:
        """The loop's body, on its own thread: loop until `stopping`, sleeping with `nap`."""
