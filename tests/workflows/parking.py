"""Reactors whose runs wait for async units in a worker: they park instead of holding it.

Imported by `reactorflow worker tests.workflows.parking` subprocesses (the background module's
import configures their storage and broker) and by the tests.
"""

from __future__ import annotations

import os

import anyio
import msgspec

import reactorflow as rf
from tests.workflows import background as bg

ASYNC_WAIT_ENV = "REACTORFLOW_TEST_ASYNC_WAIT"

if os.environ.get(ASYNC_WAIT_ENV):
    rf.configure(async_wait_timeout=float(os.environ[ASYNC_WAIT_ENV]))


# -- many runs, each waiting for a short unit ----------------------------------------------------

class WaitsIn(msgspec.Struct):
    n: int


waits = rf.Reactor("tests.park.waits", inputs=WaitsIn)


@waits.async_step
async def quick_unit(n: int) -> int:
    await anyio.sleep(0.05)
    return n * 10


@waits.step
async def quick_reader(quick_unit: int) -> int:
    return quick_unit + 1


# -- one run whose unit waits for a gate the test opens ------------------------------------------

gated = rf.Reactor("tests.park.gated")


@gated.async_step
async def gated_unit() -> str:
    bg.note("gated_unit")
    await bg.wait_for_gate("unit")
    return "unit done"


@gated.step
async def gated_reader(gated_unit: str) -> str:
    bg.note("gated_reader")
    return f"read {gated_unit}"


# -- a step whose retry backoff parks its run ----------------------------------------------------

retrying = rf.Reactor("tests.park.retrying")


@retrying.step(retries=rf.Retry(attempts=3, backoff=0.6, strategy="fixed"))
async def flaky(ctx: rf.StepContext) -> int:
    bg.note(f"flaky attempt {ctx.attempt} {ctx.idempotency_key}")
    if ctx.attempt < 3:
        raise ConnectionError(f"not yet ({ctx.attempt})")
    return ctx.attempt


@flaky.compensate
async def unflaky(error: Exception) -> None:
    bg.note("unflaky")


@retrying.step
async def after_flaky(flaky: int) -> str:
    return f"succeeded on attempt {flaky}"


# -- a map fanned out over the workers ------------------------------------------------------------

class FleetIn(msgspec.Struct):
    items: list[int]


fleet = rf.Reactor("tests.park.fleet", inputs=FleetIn)


@fleet.map_step(over="items", fan_out=True, batch_size=3)
async def square(item: int) -> int:
    bg.note(f"square {item}")
    return item * item


@fleet.step
async def total(square: list[int]) -> int:
    return sum(square)
