"""`trampoline.in_copy`: a coroutine awaited in the calling task on a copy of its context, as a
task of its own would run it (its context variables stay inside; cancellation, exceptions and
return values pass as they would)."""

from __future__ import annotations

import asyncio
import contextvars

import anyio
import pytest

from reactorflow.runtime.engine.trampoline import in_copy

SEEN = contextvars.ContextVar[str]("seen", default="caller")


async def test_a_context_variable_set_inside_stays_inside() -> None:
    async def inner() -> str:
        SEEN.set("inner")
        await anyio.sleep(0)  # suspends: set again after every resumption would be wrong
        await asyncio.sleep(0.001)  # waits on a future
        return SEEN.get()

    assert await in_copy(inner()) == "inner"
    assert SEEN.get() == "caller"


async def test_the_same_task_runs_it() -> None:
    async def inner() -> asyncio.Task[object] | None:
        await anyio.sleep(0)
        return asyncio.current_task()

    assert await in_copy(inner()) is asyncio.current_task()


async def test_an_exception_it_raises_reaches_the_caller() -> None:
    async def inner() -> None:
        await anyio.sleep(0)
        raise KeyError("inner")

    with pytest.raises(KeyError, match="inner"):
        await in_copy(inner())


async def test_a_cancellation_reaches_it_where_it_waits() -> None:
    seen: list[str] = []
    waiting = anyio.Event()

    async def inner() -> None:
        try:
            waiting.set()
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            async def caller() -> None:
                await in_copy(inner())
                seen.append("not reached")

            tg.start_soon(caller)
            await waiting.wait()
            tg.cancel_scope.cancel()
    assert seen == ["cancelled"]


async def test_its_own_cancel_scope_is_cancelled_there_and_it_goes_on() -> None:
    scopes: list[anyio.CancelScope] = []
    waiting = anyio.Event()
    found: list[str] = []

    async def inner() -> str:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            waiting.set()
            await anyio.sleep_forever()
        assert scope.cancelled_caught
        await anyio.sleep(0)
        return "went on"

    async def caller() -> None:
        found.append(await in_copy(inner()))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller)
            await waiting.wait()
            scopes[0].cancel()
    assert found == ["went on"]
