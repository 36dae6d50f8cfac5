"""Awaiting a coroutine in the calling task, on a copy of the caller's context.

What a new task would give the coroutine (its own copy of the context variables, so whatever it
sets never reaches the caller) without spawning one: no task to create, and no event-loop turns
to start it and to wake the caller when it ends. `Runners.run` takes the run's first runner this
way (the spares it needs are tasks of the run's task group).

The algorithm (the protocol an asyncio task speaks with a coroutine):

1. Advance the coroutine inside the copy (`Context.run(coro.send, None)`).
2. What it yields (a future it waits for, or None for a bare yield) is yielded, unchanged, to
   the calling task, which waits for it exactly as if the coroutine were its own.
3. When the task resumes, go back to 1; if it resumes with an exception (a cancellation
   delivered to the task, `GeneratorExit` when it is closed), throw that exception into the
   coroutine inside the copy instead, so the coroutine sees it where it waits, as it would in
   a task of its own.
4. The coroutine's return value is returned; an exception it raises propagates to the caller.

`go_on` speaks the same protocol without the copy: it goes on awaiting a coroutine that was
started by hand (`coro.send(None)`, to learn whether it completes without suspending: see
`Forward._plain`) and suspended, from what it yielded first.

Why it stays (measured side by side in callgrind instructions, 2026-12-02: the same program,
`benchmarks/_chain_program.py`, on this code and on a copy whose first runner is a task of the
run's task group, opened at once): a 10-step chain on MemoryStorage costs 1,288 k instructions
per run that way and 807 k this way (-37%); earlier, in µs, 196 µs per run against 112. It is
tested against a task's semantics in `tests/runtime/test_trampoline.py` (context isolation,
cancellation, exceptions).

The task stays the same throughout (`asyncio.current_task()`, anyio's cancel scopes and their
deadlines are those of the caller), only the context variables differ.
"""

from __future__ import annotations

import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class _Pass:
    """An awaitable that yields one value to the task and returns what the task sends."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self.value)


async def in_copy(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` in the calling task on a copy of the current context (see the module)."""
    context = contextvars.copy_context()
    run = context.run
    send, throw = coro.send, coro.throw
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                yielded = run(send, None)
            else:
                yielded, error = run(throw, error), None
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            await _Pass(yielded)
        except BaseException as exc:  # delivered to the task: the coroutine's to handle
            error = exc


async def go_on(coro: Coroutine[Any, Any, T], yielded: Any) -> T:
    """Go on awaiting `coro`, started by hand, which yielded `yielded` (see the module): what
    `await coro` would have done from there."""
    send, throw = coro.send, coro.throw
    while True:
        try:
            sent = await _Pass(yielded)
        except BaseException as exc:  # delivered to the task: the coroutine's to handle
            try:
                yielded = throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            continue
        try:
            yielded = send(sent)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
