"""The sync facade's event loop: one private event-loop thread per process, behind anyio's
blocking portal, that runs the coroutines of `reactor.sync.*` and `rf.sync.*` for sync callers.

- **Started on first use**, under a lock, so many threads calling at once share one loop; each
  call is a task of that loop, so calls from different threads run concurrently.
- **Refused inside a running event loop** (`SyncInEventLoop`, naming the async method to
  await): blocking there would stall every other task of that loop, or deadlock when the loop
  is the portal's own.
- **Stopped at interpreter exit** (`atexit`): the calls still in flight are cancelled, the loop
  ends (closing the connections opened on it, see `reactorflow.storage.redis.connections`) and
  its thread is joined. The thread is a daemon, so it never holds the interpreter up by itself.
- **Started afresh after `os.fork`** (a Celery prefork worker, a gunicorn worker): a child has
  the parent's memory but none of its threads, so the parent's portal is forgotten there (never
  called: its thread does not exist) and the child's first call starts its own. The process id
  is checked on every call too, for a fork that skipped the `os.register_at_fork` hooks.

The thread is our own, running `anyio.run` around a `BlockingPortal`, rather than
`anyio.from_thread.start_blocking_portal`: that context manager stops its portal *through* the
portal when it is exited or garbage-collected, which in a forked child (where the portal's
thread does not exist) blocks forever, and dropping the parent's portal there collects it.

Storage objects need nothing of this: one storage object may be used from several threads and
event loops at once (each loop gets its own connections), so the portal's loop shares the
configured storage with any loop of the application.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from reactorflow.errors import SyncInEventLoop

T = TypeVar("T")

THREAD_NAME = "reactorflow-sync"


@dataclass(frozen=True, slots=True)
class _Loop:
    """A started portal, its thread, and the process that started it."""

    pid: int
    portal: BlockingPortal
    thread: threading.Thread


_mutex = threading.Lock()
_current: _Loop | None = None


def _start() -> _Loop:
    started: Future[BlockingPortal] = Future()

    async def serve() -> None:
        async with BlockingPortal() as served:
            started.set_result(served)
            await served.sleep_until_stopped()

    def main() -> None:
        try:
            anyio.run(serve)
        except BaseException as exc:  # a loop that failed to start: the caller raises it
            if not started.done():
                started.set_exception(exc)
            raise

    thread = threading.Thread(target=main, name=THREAD_NAME, daemon=True)
    thread.start()
    return _Loop(os.getpid(), started.result(), thread)


def portal() -> BlockingPortal:
    """This process's portal, started on first use (or first use after a fork)."""
    global _current
    found = _current
    if found is not None and found.pid == os.getpid():
        return found.portal
    with _mutex:
        if _current is None or _current.pid != os.getpid():
            _current = _start()  # a parent's portal (after a fork) is dropped, never called
        return _current.portal


def refuse_in_event_loop(called: str, instead: str, reactor: str | None) -> None:
    """Raise `SyncInEventLoop` when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise SyncInEventLoop(called, instead, reactor=reactor)


def call(work: Callable[[], Awaitable[T]], *, called: str, instead: str,
         reactor: str | None = None) -> T:
    """Run `work()` on this process's event-loop thread; block until it returns, and return
    its result (or raise its error).

    Args:
        work: The coroutine function to run (no arguments: a `functools.partial`).
        called: The sync method the caller called (for the refusal).
        instead: The async method to await instead (for the refusal).
        reactor: The reactor whose sync method it is, or None.

    Raises:
        SyncInEventLoop: This thread runs an event loop (nothing was started).
    """
    refuse_in_event_loop(called, instead, reactor)
    return portal().call(work)


def shutdown() -> None:
    """Stop this process's portal, if it started one: cancel the calls in flight, end the
    loop, join its thread (at interpreter exit; a later call starts a new one)."""
    global _current
    with _mutex:
        found, _current = _current, None
    if found is None or found.pid != os.getpid():
        return
    with contextlib.suppress(RuntimeError):  # already stopped
        found.portal.call(found.portal.stop, True)
    found.thread.join()


def _forget_after_fork() -> None:
    """In a forked child: the parent's portal thread does not exist here, and the lock may have
    been held by one of the parent's threads at the fork."""
    global _mutex, _current
    _mutex = threading.Lock()
    _current = None


atexit.register(shutdown)
os.register_at_fork(after_in_child=_forget_after_fork)
