"""A reactor for real worker processes under a codec (tests/protection/test_workers.py): the
worker's module configures the codec from `REACTORFLOW_TEST_CODEC_KEY` (hex), as an
application's module configures its own from its secret store, and the storage and broker of
the test's namespace (through `tests.workflows.background`)."""

from __future__ import annotations

import os

import msgspec

import reactorflow as rf
from tests.workflows import background  # noqa: F401 - configures the lane's storage and broker

KEY_ENV = "REACTORFLOW_TEST_CODEC_KEY"
MARKER = "QWV-worker-secret-19c2"

if os.environ.get(KEY_ENV):
    rf.configure(codec=rf.EncryptionCodec(keys={"w1": bytes.fromhex(os.environ[KEY_ENV])},
                                          current="w1"))


class Batch(msgspec.Struct):
    owner: str
    items: list[str]


shipping = rf.Reactor("tests.protected.shipping", inputs=Batch)


@shipping.async_step
async def quote(owner: str) -> str:
    return f"quote for {owner}"


@shipping.map_step(over="items", fan_out=True, atomic=False, batch_size=2)
async def ship(item: str, owner: str) -> str:
    if item.endswith("!"):
        raise ValueError(f"cannot ship {item} for {owner}")
    return f"{item} shipped for {owner}"


@shipping.step
async def done(ship: list[rf.Outcome[str]], quote: str) -> str:
    return f"{sum(o.ok for o in ship)} of {len(ship)}, {quote}"
