"""The real-worker lane for maps: a 1,000-element map fanned out over two `reactorflow worker`
processes on the suite's Redis; one is SIGKILLed mid-map (its elements in flight die with it),
and the sweeper recovers what was lost."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import records
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import background as bg

pytestmark = pytest.mark.slow
__all__ = ["gates", "shared"]  # fixtures, used by name
SIZE = 1_000


async def _sweep_while(reactor: rf.Reactor, run_id: str, status: rf.Status, stuck: str) -> int:
    """Run the sweeper every half second while the run is still `status` (the recovery under
    test); fail with `stuck` after 180 s. Returns how many sweeps ran."""
    deadline = time.monotonic() + 180
    sweeps = 0
    while (await reactor.get(run_id)).status is status:
        assert time.monotonic() < deadline, stuck
        await rf.sweep_once()
        sweeps += 1
        await anyio.sleep(0.5)
    return sweeps


async def test_a_killed_worker_mid_map_is_recovered_by_the_sweeper(shared: Shared,
                                                                   gates: Path) -> None:
    storage = rf.RedisStorage.from_url(shared.url, namespace=shared.namespace)
    doomed = Workers(shared, gates, threads=4)
    survivor = Workers(shared, gates, threads=4)
    try:
        run = await bg.fleet.run(items=list(range(SIZE)))
        assert run.status is rf.Status.RUNNING  # parked at the map
        with anyio.fail_after(120):
            while await storage.count_elements(run.id, "haul") < SIZE // 5:
                await anyio.sleep(0.02)
        doomed.kill()  # mid-map: elements in flight in it die with it
        killed_at = await storage.count_elements(run.id, "haul")
        assert killed_at < SIZE
        sweeps = await _sweep_while(bg.fleet, run.id, rf.Status.RUNNING,
                                    "the map never completed after the kill")
        done = await bg.fleet.wait(run.id, timeout=30)
    finally:
        doomed.kill()
        survivor.stop()
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == [3 * i for i in range(SIZE)]
    hauled = [int(line.split()[1]) for line in bg.notes(shared.log) if line.startswith("haul ")]
    assert set(hauled) == set(range(SIZE))  # every element executed at least once
    assert await storage.count_elements(run.id, "haul") == SIZE  # and stored once each
    slots = await storage.load_elements(run.id, "haul", 0, SIZE)
    assert all(raw is not None and records.decode_element(raw).status == "completed"
               for raw in slots)
    assert [e.kind for e in done.history].count("run.completed") == 1
    assert sweeps >= 1
    worker_logs = shared.log.with_suffix(".stderr").read_text(encoding="utf-8")
    assert "reactorflow.map.redispatch" in worker_logs  # lost elements went out again
    await storage.aclose()


UNDO_SIZE = 2 * bg.HANG_BELOW


def _cut_off(notes: list[str]) -> set[int]:
    """The undos the killed worker had started but not finished (those hanging, and any other
    one it was in the middle of): they may run again."""
    def noted(kind: str) -> set[int]:
        return {int(line.split()[1]) for line in notes if line.startswith(f"uncarry-{kind} ")}

    return noted("starts") - noted("ends")


async def test_a_worker_killed_mid_rollback_is_recovered_by_the_sweeper(shared: Shared,
                                                                        gates: Path) -> None:
    """A later step fails: the map's completed elements are undone by undo jobs in both
    workers; one worker is SIGKILLed while it undoes an element (its undos of the lower half
    hang, so the kill always lands mid element-rollback). The sweeper re-dispatches what was
    lost: every element is undone, and only the cut-off undos ran twice."""
    import redis

    storage = rf.RedisStorage.from_url(shared.url, namespace=shared.namespace)
    doomed = Workers(shared, gates, threads=4, env={bg.DOOMED_ENV: "1"})
    survivor = Workers(shared, gates, threads=4)
    client = redis.Redis.from_url(shared.url)
    undone_key, calls_key = bg.undo_keys(shared.namespace)
    try:
        run = await bg.unhaul_fleet.run(items=list(range(UNDO_SIZE)))
        with anyio.fail_after(120):
            while not any(line.startswith("uncarry-hangs ") for line in bg.notes(shared.log)):
                await anyio.sleep(0.02)
        saved_before = client.scard(undone_key)
        doomed.kill()  # mid element-rollback: its hanging undos die with it
        cut_off = _cut_off(bg.notes(shared.log))
        assert (await bg.unhaul_fleet.get(run.id)).status is rf.Status.ROLLING_BACK
        sweeps = await _sweep_while(bg.unhaul_fleet, run.id, rf.Status.ROLLING_BACK,
                                    "the rollback never finished after the kill")
        done = await bg.unhaul_fleet.wait(run.id, timeout=30)
        undone = {int(i) for i in client.smembers(undone_key)}
        calls = [int(i) for i in client.lrange(calls_key, 0, -1)]
    finally:
        doomed.kill()
        survivor.stop()
        client.close()
    assert done.status is rf.Status.FAILED, done.error
    assert done.error is not None and done.error.step == "deliver"
    assert done.error.rollback_failures == []
    assert saved_before > 0 and sweeps >= 1
    assert undone == set(range(UNDO_SIZE))  # every completed element undone
    twice = {i for i in set(calls) if calls.count(i) > 1}
    assert twice <= cut_off  # only the undos cut off by the kill ran again
    assert all(calls.count(i) == 1 for i in range(UNDO_SIZE) if i not in cut_off)
    slots = await storage.load_elements(run.id, "carry", 0, UNDO_SIZE)
    assert all(raw is not None and records.decode_element(raw).status == "undone"
               for raw in slots)
    assert done.steps["carry"].status == "undone"
    worker_logs = shared.log.with_suffix(".stderr").read_text(encoding="utf-8")
    assert "reactorflow.map.undo_redispatch" in worker_logs  # the lost undos went out again
    await storage.aclose()
