"""A caller that stops waiting for its second (or later) gate holds nothing: the places and the
turn it took before are given back at once, whether its wait ended with `rf.GateBusy` or it was
cancelled; for a reactor's gates (nothing stored) and for a step's (both backends)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.storage.contract.values import GateTake
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import unique


class Account(msgspec.Struct):
    account_id: str


FIRST = {
    "lock": lambda key: rf.Lock(key, wait=60),
    "semaphore": lambda key: rf.Semaphore(key, limit=1, wait=60),
    "ordered_lock": lambda key: rf.OrderedLock(key, wait=60),
}
"""The first gate taken (the second is a semaphore: gates are taken lock before semaphore)."""


async def queued(storage: rf.Storage, key: str) -> int:
    """How many holders wait in gate `key`'s queue."""
    if isinstance(storage, RedisStorage):
        conn = await storage._redis.get()
        return int(await conn.client.zcard(storage._gate(key, "queue")))
    return len(storage._queues.get(key, {}))  # type: ignore[attr-defined]


async def waiting_on(storage: rf.Storage, key: str) -> None:
    """Until a caller is queued for gate `key` (it took every gate before it)."""
    with anyio.fail_after(30):
        while await queued(storage, key) < 1:
            await anyio.sleep(0.005)


async def first_is_free(storage: rf.Storage, kind: str, key: str) -> None:
    """The first gate is held by nobody: another holder takes it (or its turn) at once."""
    if kind == "ordered_lock":
        await storage.ordered_enter(key, "next-in-line")
        assert await storage.ordered_turn(key, "next-in-line", 600) is True
    else:
        assert await storage.gate_holders(key) == []
        assert await storage.gate_acquire(key, "next", limit=1, ttl=60) is GateTake.ACQUIRED


async def cancelled_while(storage: rf.Storage, key: str,
                          start: Callable[[], Awaitable[object]]) -> None:
    """Run `start` and cancel it once it waits for gate `key`."""
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await waiting_on(storage, key)
            tg.cancel_scope.cancel()


def second_held(storage: rf.Storage, key: str) -> Awaitable[GateTake]:
    return storage.gate_acquire(key, f"h-{uuid.uuid4().hex[:8]}", limit=1, ttl=60)


def two_gated(kind: str, wait: float, *, on_step: bool = False) -> rf.Reactor:
    """A reactor with two gates (keys `first:`, `second:`), or one step with two (`s1:`, `s2:`),
    the second waiting up to `wait`."""
    first, second = ("s1", "s2") if on_step else ("first", "second")
    gates = [FIRST[kind](first + ":{account_id}"),
             rf.Semaphore(second + ":{account_id}", limit=1, wait=wait)]
    flow = rf.Reactor(unique("second"), inputs=Account, gates=[] if on_step else gates)

    @flow.step(gates=gates if on_step else [])
    async def work(account_id: str) -> str:
        return account_id

    return flow


@pytest.mark.parametrize("kind", list(FIRST))
async def test_a_caller_cancelled_on_its_second_reactor_gate_holds_nothing(
        storage: rf.Storage, kind: str) -> None:
    flow = two_gated(kind, 60)
    await second_held(storage, "second:A1")
    await cancelled_while(storage, "second:A1", lambda: flow.run(account_id="A1"))
    assert (await flow.list_runs(limit=10)).runs == []  # nothing stored
    assert await queued(storage, "second:A1") == 0
    await first_is_free(storage, kind, "first:A1")


@pytest.mark.parametrize("kind", list(FIRST))
async def test_a_caller_busy_on_its_second_reactor_gate_holds_nothing(
        storage: rf.Storage, kind: str) -> None:
    flow = two_gated(kind, 0.2)
    await second_held(storage, "second:A1")
    with anyio.fail_after(30), pytest.raises(rf.GateBusy) as busy:
        await flow.run(account_id="A1")
    assert (busy.value.gate, busy.value.key) == ("semaphore", "second:A1")
    assert (await flow.list_runs(limit=10)).runs == []
    await first_is_free(storage, kind, "first:A1")


@pytest.mark.parametrize("kind", list(FIRST))
async def test_a_caller_cancelled_on_its_step_s_second_gate_holds_nothing(
        storage: rf.Storage, kind: str) -> None:
    flow = two_gated(kind, 60, on_step=True)
    await second_held(storage, "s2:A1")
    await cancelled_while(storage, "s2:A1", lambda: flow.run(account_id="A1"))
    assert await queued(storage, "s2:A1") == 0
    await first_is_free(storage, kind, "s1:A1")


@pytest.mark.parametrize("kind", list(FIRST))
async def test_a_step_busy_on_its_second_gate_holds_nothing(storage: rf.Storage,
                                                           kind: str) -> None:
    flow = two_gated(kind, 0.2, on_step=True)
    await second_held(storage, "s2:A1")
    with anyio.fail_after(30):
        run = await flow.run(account_id="A1")
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "GateBusy"
    await first_is_free(storage, kind, "s1:A1")
