"""The features-compose matrix (issue 22, item 23): every kind of step produces a value that
every other kind reads.

Each pair is one reactor, `tests.matrix.<producer>.<consumer>`, built here at import, so that
`reactorflow worker tests.workflows.matrix` knows every one of them. A pair's reactor has:

- `make`, declared by the producer's factory: its value is the list `[1, 2, 3]` (`EXPECTED_MADE`),
  however that kind comes by it (a step returns it, a map maps the input `seeds`, a composed or
  async child returns it, an interrupt takes it as its payload, a step reads it after a sleep
  whose value, the moment it woke for, it reads too), or it is skipped (`when=` false: then
  `use` and `done` are skipped too, and the value is None);
- `use`, declared by the consumer's factory: it reads `make` as that kind reads (a parameter,
  `when=`, `over=`, the inputs of a child, the body of a sleep that `use` then reads...) and
  makes 10 times the sum of what it read;
- `done`, a plain step reading `use`: the reactor's value, `EXPECTED` (60) when every hand-over
  worked. A consumer nobody may read (fire and forget) has no `done`; its own result is checked.

A new kind is one entry in `PRODUCERS` and one in `CONSUMERS`. A test answers an interrupt
`make` with `MADE_PAYLOAD`, and an interrupt `use` with `USE_PAYLOAD`.

In a `reactorflow worker` subprocess of the tests (REACTORFLOW_TEST_NAMESPACE set) the storage
and broker are configured here, as `tests.workflows.background` does for its workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pydantic

import reactorflow as rf
from tests.workflows.background import LOCK_TTL_ENV, NAMESPACE_ENV, namespaced

if os.environ.get(LOCK_TTL_ENV):  # worker subprocesses of the tests: a short lock TTL
    rf.configure(lock_ttl=float(os.environ[LOCK_TTL_ENV]), stall_timeout=0.5)
if os.environ.get(NAMESPACE_ENV) and os.environ.get("REACTORFLOW_REDIS_URL"):
    _storage, _broker = namespaced(os.environ["REACTORFLOW_REDIS_URL"], os.environ[NAMESPACE_ENV])
    rf.configure(storage=_storage, broker=_broker)

EXPECTED_MADE = [1, 2, 3]
EXPECTED = 10 * sum(EXPECTED_MADE)


class Seed(msgspec.Struct):
    seed: int = 1
    seeds: list[int] = msgspec.field(default_factory=lambda: list(EXPECTED_MADE))


class Made(msgspec.Struct):
    values: list[int]


class Factor(msgspec.Struct):
    factor: int


class Values(msgspec.Struct):
    values: list[int]


MADE_PAYLOAD = {"values": EXPECTED_MADE}
USE_PAYLOAD = {"factor": 10}


def _made(seed: int) -> list[int]:
    return [seed, seed + 1, seed + 2]


# -- the children composed or started by the producers and consumers ----------------------------

making_child = rf.Reactor("tests.matrix.child.make", inputs=Seed)


@making_child.step
async def listed(seed: int) -> list[int]:
    return _made(seed)


class SeedModel(pydantic.BaseModel):  # Seed's `seed`, as a pydantic model
    seed: int


model_child = rf.Reactor("tests.matrix.child.make_model", inputs=SeedModel)


@model_child.step
async def listed_from_model(seed: int) -> list[int]:
    return _made(seed)


using_child = rf.Reactor("tests.matrix.child.use", inputs=Values)


@using_child.step
async def summed(values: list[int]) -> int:
    return 10 * sum(values)


# -- producers: each declares `make`, whose value is EXPECTED_MADE ------------------------------


def produce_step(flow: rf.Reactor) -> None:
    @flow.step
    async def make(seed: int) -> list[int]:
        return _made(seed)


def produce_when(flow: rf.Reactor) -> None:
    @flow.step(when=lambda seed: seed > 0)
    async def make(seed: int) -> list[int]:
        return _made(seed)


def produce_skipped(flow: rf.Reactor) -> None:
    """A `when=` that is false: `make` is skipped, and so is every step that reads it."""
    @flow.step(when=lambda seed: seed < 0)
    async def make(seed: int) -> list[int]:
        return _made(seed)


def _produce_map(fan_out: bool) -> Callable[[rf.Reactor], None]:
    def produce(flow: rf.Reactor) -> None:
        @flow.map_step(over="seeds", fan_out=fan_out)
        async def make(item: int) -> int:
            return item

    return produce


def produce_compose(flow: rf.Reactor) -> None:
    @flow.compose(making_child)
    async def make(seed: int) -> dict[str, Any]:
        return {"seed": seed}


def produce_async_step(flow: rf.Reactor) -> None:
    @flow.async_step
    async def make(seed: int) -> list[int]:
        return _made(seed)


def produce_async_reactor(flow: rf.Reactor) -> None:
    @flow.async_reactor(making_child)
    async def make(seed: int) -> dict[str, Any]:
        return {"seed": seed}


def produce_interrupt(flow: rf.Reactor) -> None:
    @flow.interrupt
    async def make(payload: Made) -> list[int]:
        return payload.values


def produce_compose_pydantic(flow: rf.Reactor) -> None:
    """A composed child whose inputs type is a pydantic model (reactorflow[pydantic])."""
    @flow.compose(model_child)
    async def make(seed: int) -> SeedModel:
        return SeedModel(seed=seed)


NAP = 0.3
"""Seconds a matrix sleep sleeps (fake seconds on the test kit's lanes)."""


def _woke(moment: datetime) -> None:
    if moment.tzinfo is None or moment > datetime.now(UTC) + timedelta(days=3650):
        raise ValueError(f"a sleep's value is an aware datetime of its deadline, not {moment!r}")


def produce_sleep(flow: rf.Reactor) -> None:
    """A sleep first: `make` reads the moment it woke for (and the seed)."""
    @flow.sleep
    async def nap(seed: int) -> float:
        return NAP

    @flow.step
    async def make(nap: datetime, seed: int) -> list[int]:
        _woke(nap)
        return _made(seed)


@dataclass(frozen=True)
class Producer:
    """How one kind makes `make`: `declare` adds it; `skips`: it is skipped (its readers, and
    theirs, are skipped too: the run completes with the value None)."""

    declare: Callable[[rf.Reactor], None]
    skips: bool = False


PRODUCERS: dict[str, Producer] = {
    "step": Producer(produce_step),
    "when": Producer(produce_when),
    "skipped": Producer(produce_skipped, skips=True),
    "map_inline": Producer(_produce_map(False)),
    "map_fanout": Producer(_produce_map(True)),
    "compose": Producer(produce_compose),
    "async_step": Producer(produce_async_step),
    "async_reactor": Producer(produce_async_reactor),
    "interrupt": Producer(produce_interrupt),
    "compose_pydantic": Producer(produce_compose_pydantic),
    "sleep": Producer(produce_sleep),
}


# -- consumers: each declares `use` reading `make` (and `done`, the value, reading `use`) -------


@dataclass(frozen=True)
class Consumer:
    """How one kind reads `make`: `declare` adds `use` (and whatever it needs); `maps` says
    that `use` is a map (its readers get a list); `readable` False: nothing may read `use` (a
    fire-and-forget unit), so the pair has no `done` and the test checks `use` itself."""

    declare: Callable[[rf.Reactor], None]
    maps: bool = False
    readable: bool = True


def consume_step(flow: rf.Reactor) -> None:
    @flow.step
    async def use(make: list[int]) -> int:
        return 10 * sum(make)


def consume_when(flow: rf.Reactor) -> None:
    @flow.step(when=lambda make: make == EXPECTED_MADE)
    async def use(make: list[int]) -> int:
        return 10 * sum(make)


def _consume_map(fan_out: bool) -> Callable[[rf.Reactor], None]:
    def consume(flow: rf.Reactor) -> None:
        @flow.map_step(over="make", fan_out=fan_out)
        async def use(item: int) -> int:
            return 10 * item

    return consume


def consume_compose(flow: rf.Reactor) -> None:
    @flow.compose(using_child)
    async def use(make: list[int]) -> dict[str, Any]:
        return {"values": make}


def consume_async_step(flow: rf.Reactor) -> None:
    @flow.async_step
    async def use(make: list[int]) -> int:
        return 10 * sum(make)


def consume_async_reactor(flow: rf.Reactor) -> None:
    @flow.async_reactor(using_child)
    async def use(make: list[int]) -> dict[str, Any]:
        return {"values": make}


def consume_interrupt(flow: rf.Reactor) -> None:
    @flow.interrupt
    async def use(payload: Factor, make: list[int]) -> int:
        return payload.factor * sum(make)


def consume_sleep(flow: rf.Reactor) -> None:
    """A sleep whose body reads `make` (its duration comes from it); `use` reads the moment it
    woke for, and `make`."""
    @flow.sleep
    async def use_nap(make: list[int]) -> timedelta:
        if make != EXPECTED_MADE:
            raise ValueError(f"the sleep read {make!r}")
        return timedelta(seconds=NAP)

    @flow.step
    async def use(use_nap: datetime, make: list[int]) -> int:
        _woke(use_nap)
        return 10 * sum(make)


def consume_handoff(flow: rf.Reactor) -> None:
    """A plain step at the run's hand-off point (`background(before=...)`): a worker runs it."""
    consume_step(flow)
    flow.background(before="use")


CONSUMERS: dict[str, Consumer] = {
    "step": Consumer(consume_step),
    "when": Consumer(consume_when),
    "map_inline": Consumer(_consume_map(False), maps=True),
    "map_fanout": Consumer(_consume_map(True), maps=True),
    "compose": Consumer(consume_compose),
    "async_step": Consumer(consume_async_step),
    "async_reactor": Consumer(consume_async_reactor),
    "interrupt": Consumer(consume_interrupt),
    "fire_and_forget": Consumer(consume_async_step, readable=False),
    "handoff": Consumer(consume_handoff),
    "sleep": Consumer(consume_sleep),
}


# -- the pairs ----------------------------------------------------------------------------------


def _finish(flow: rf.Reactor, consumer: Consumer) -> None:
    if not consumer.readable:
        return
    if consumer.maps:
        @flow.step
        async def done(use: list[int]) -> int:
            return sum(use)
    else:
        @flow.step
        async def done(use: int) -> int:
            return use


def build(producer: str, consumer: str) -> rf.Reactor:
    """The reactor of one pair (see the module docstring)."""
    flow = rf.Reactor(f"tests.matrix.{producer}.{consumer}", inputs=Seed)
    PRODUCERS[producer].declare(flow)
    CONSUMERS[consumer].declare(flow)
    _finish(flow, CONSUMERS[consumer])
    return flow


PAIRS: dict[tuple[str, str], rf.Reactor] = {
    (producer, consumer): build(producer, consumer)
    for producer in PRODUCERS for consumer in CONSUMERS
}
