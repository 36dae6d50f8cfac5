"""Real `reactorflow worker` processes under a codec (api.md §17): a worker whose module
configures the same key runs a fanned-out map's elements and an async step of a protected run,
and nothing it writes is clear: the marker is found in no key of the Redis server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import reactorflow as rf
from tests.protection.conftest import redis_bytes
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import protected

__all__ = ["gates", "shared"]  # fixtures (the workers' lane, not the CLI's of conftest)


@pytest.fixture
def key() -> Iterator[bytes]:
    made = os.urandom(32)
    rf.configure(codec=rf.EncryptionCodec(keys={"w1": made}, current="w1"))
    yield made
    rf.configure(codec=None)


async def test_workers_with_the_key_write_only_sealed_values(shared: Shared, gates: Path,
                                                             key: bytes) -> None:
    workers = Workers(shared, gates, module="tests.workflows.protected",
                      env={protected.KEY_ENV: key.hex()})
    try:
        owner = f"{protected.MARKER}-owner"
        run = await protected.shipping.dispatch(
            owner=owner, items=[f"{protected.MARKER}-a", f"{protected.MARKER}-b!"])
        done = await protected.shipping.wait(run.id, timeout=90)
    finally:
        workers.stop()
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == f"1 of 2, quote for {owner}"
    assert protected.MARKER in str((await rf.get_run(run.id)).steps["quote"].result)
    stored = redis_bytes(shared.url)
    assert any(run.id.encode() in b for b in stored)
    assert [b[:200] for b in stored if protected.MARKER.encode() in b] == []
