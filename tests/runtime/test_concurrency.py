"""Independent steps really run at the same time; max_concurrency bounds them."""

from __future__ import annotations

import anyio
import pytest

import reactorflow as rf
from tests.helpers import unique


async def test_independent_steps_overlap(storage: rf.Storage) -> None:
    """Each step waits for an event only the other sets: sequential execution would hang."""
    flow = rf.Reactor(unique("overlap"))
    left_ready, right_ready = anyio.Event(), anyio.Event()

    @flow.step
    async def left() -> str:
        left_ready.set()
        await right_ready.wait()
        return "L"

    @flow.step
    async def right() -> str:
        right_ready.set()
        await left_ready.wait()
        return "R"

    @flow.step
    async def both(left: str, right: str) -> str:
        return left + right

    with anyio.fail_after(10):
        run = await flow.run()
    assert run.value == "LR"


async def test_steps_released_together_after_a_chain_overlap(storage: rf.Storage) -> None:
    """A chain runs in the calling task alone (no task group); the two steps its last step
    releases at once still run at the same time (the group opens then): sequential would hang."""
    flow = rf.Reactor(unique("chain-then-overlap"))
    left_ready, right_ready = anyio.Event(), anyio.Event()

    @flow.step
    async def first() -> int:
        return 1

    @flow.step
    async def second(first: int) -> int:
        return first + 1

    @flow.step
    async def left(second: int) -> str:
        left_ready.set()
        await right_ready.wait()
        return f"L{second}"

    @flow.step
    async def right(second: int) -> str:
        right_ready.set()
        await left_ready.wait()
        return f"R{second}"

    @flow.step
    async def both(left: str, right: str) -> str:
        return left + right

    with anyio.fail_after(10):
        run = await flow.run()
    assert run.value == "L2R2"


async def test_many_independent_steps_all_in_flight_at_once(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("wide"))
    width = 40
    arrived = 0
    everyone = anyio.Event()

    async def body() -> int:
        nonlocal arrived
        arrived += 1
        if arrived == width:
            everyone.set()
        await everyone.wait()  # only returns once all `width` steps are in flight
        return 1

    for i in range(width):
        body_i = _renamed(body, f"s{i}")
        flow.step(body_i)

    with anyio.fail_after(10):
        run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert arrived == width


def _renamed(fn, name):  # type: ignore[no-untyped-def]
    async def wrapper() -> int:
        return await fn()  # type: ignore[no-any-return]

    wrapper.__name__ = name
    return wrapper


@pytest.mark.parametrize("limit", [1, 3])
async def test_max_concurrency_bounds_steps_in_flight(storage: rf.Storage, limit: int) -> None:
    flow = rf.Reactor(unique("bounded"), max_concurrency=limit)
    in_flight = 0
    peak = 0

    async def body() -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(3):
            await anyio.sleep(0)  # give every other runnable step a chance to start
        in_flight -= 1
        return 1

    for i in range(10):
        flow.step(_renamed(body, f"s{i}"))

    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert peak == limit
