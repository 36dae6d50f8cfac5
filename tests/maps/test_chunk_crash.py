"""A `reactorflow worker` SIGKILLed in the middle of a chunk (issue 30, target 1): the
elements of the chunk it had settled never run again, the one cut off mid-body runs again, and
those it never reached run once, in another worker. Each element's executions are counted in
Redis (outside the killed process)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
import redis

import reactorflow as rf
from reactorflow import records
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import background as bg

pytestmark = pytest.mark.slow
__all__ = ["gates", "shared"]  # fixtures, used by name
SIZE = 3 * bg.CHUNK


async def test_a_worker_killed_mid_chunk_reruns_only_the_unsettled_elements(
        shared: Shared, gates: Path) -> None:
    storage = rf.RedisStorage.from_url(shared.url, namespace=shared.namespace)
    client = redis.Redis.from_url(shared.url)
    key = bg.executions_key(shared.namespace)
    doomed = Workers(shared, gates, threads=2, env={bg.DOOMED_ENV: "1"})
    survivor: Workers | None = None
    try:
        run = await bg.chunked_fleet.run(items=list(range(SIZE)))
        assert run.status is rf.Status.RUNNING  # parked at the map: one job, elements 0-9
        with anyio.fail_after(60):  # a guard against a hang, not a timing assertion
            while f"pack-hangs {bg.HANG_AT}" not in bg.notes(shared.log):
                await anyio.sleep(0.02)
        settled = await storage.load_elements(run.id, "pack", 0, bg.CHUNK)
        doomed.kill()  # mid-chunk: element HANG_AT mid-body, the chunk's later ones not begun
        survivor = Workers(shared, gates, threads=2)
        deadline = time.monotonic() + 120
        while (await bg.chunked_fleet.get(run.id)).status is rf.Status.RUNNING:
            assert time.monotonic() < deadline, "the map never completed after the kill"
            await rf.sweep_once()
            await anyio.sleep(0.5)
        done = await bg.chunked_fleet.wait(run.id, timeout=30)
        executions = {int(i): int(n) for i, n in client.hgetall(key).items()}
    finally:
        doomed.kill()
        if survivor is not None:
            survivor.stop()
        client.close()
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == [2 * i for i in range(SIZE)]
    # at the kill, the chunk's elements before the hanging one were settled, none after it
    assert [raw is not None for raw in settled] == [i < bg.HANG_AT for i in range(bg.CHUNK)]
    assert executions == {i: 2 if i == bg.HANG_AT else 1 for i in range(SIZE)}
    slots = await storage.load_elements(run.id, "pack", 0, SIZE)
    assert all(raw is not None and records.decode_element(raw).status == "completed"
               for raw in slots)
    assert [e.kind for e in done.history].count("run.completed") == 1
    await storage.aclose()
