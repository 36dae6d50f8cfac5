"""A map's element slots live as long as its run: the run's later writes refresh their
retention, so a run that goes on past `retention` after its map still reads the map's results
(both backends; inline and fanned-out maps)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import pytest

import reactorflow as rf
from tests.helpers import configured, redis_namespace, unique
from tests.maps.flows import Batch

RETENTION = 1.5
"""Seconds: long enough that a loaded machine's delays (tenths of a second) never decide."""


@pytest.fixture(params=["memory", "redis"])
async def short_lived(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    backend: rf.Storage
    if request.param == "memory":
        backend = rf.MemoryStorage(retention=RETENTION)
    else:
        backend = rf.RedisStorage.from_url(request.getfixturevalue("redis_url"),
                                           namespace=redis_namespace("ret"),
                                           retention=RETENTION)
    async with configured(backend):
        yield backend


async def _until(moment: float) -> None:
    with anyio.fail_after(max(0.0, moment - time.monotonic()) + 30):
        while time.monotonic() <= moment:
            await anyio.sleep(0.02)


@pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fan_out"])
async def test_map_results_outlive_retention_while_the_run_writes(short_lived: rf.Storage,
                                                                  fan_out: bool) -> None:
    flow = rf.Reactor(unique("retain"), inputs=Batch)

    @flow.map_step(over="items", fan_out=fan_out, batch_size=2)
    async def each(item: int) -> int:
        return item * 2

    @flow.interrupt
    async def first(payload: bool, each: list[int]) -> bool:
        return payload

    @flow.interrupt
    async def second(payload: bool, first: bool) -> bool:
        return payload

    @flow.step
    async def total(each: list[int], second: bool) -> int:
        return sum(each)

    started = await flow.run(tag="r", items=[1, 2, 3])
    paused = await flow.wait(started.id, timeout=30) if fan_out else started
    with anyio.fail_after(30):
        while paused.status is not rf.Status.PAUSED:
            await anyio.sleep(0.02)
            paused = await flow.get(started.id)
    mapped = time.monotonic()  # the map's slots were last written before this
    await _until(mapped + RETENTION * 2 / 3)
    assert (await flow.continue_(paused.id, step="first", payload=True)).status is (
        rf.Status.PAUSED)  # a later execution of the run: its writes refresh the run
    await _until(mapped + RETENTION * 1.1)  # past the map's first expiry
    done = await flow.continue_(paused.id, step="second", payload=True)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == 12
    assert await short_lived.count_elements(paused.id, "each") == 3
