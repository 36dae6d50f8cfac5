"""A run whose index entries were lost is recovered (issue 22, item 5).

On a Redis Cluster a run's index entries live on other masters than the run: a dispatch cut off
between the run's script and its index writes raised after storing the run and before
enqueueing it, and nothing found the run again (the sweeper read only the indexes; a retry with
the same idempotency key returned the stored run as it was). The cut is real on the cluster
lane (tests/cutoff.py: the servers refuse the index writes after the script stored the run).
On one Redis node a creation writes its entries in its own script (nothing to cut): there the
lost write is modelled by deleting them, and the dispatch's job is dropped (the start died
before enqueueing it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.errors import StorageError
from reactorflow.runtime.engine.job_queue import Job, JobKind
from reactorflow.runtime.services import job_handling as jobs
from reactorflow.runtime.services import sweeper
from reactorflow.storage.redis.storage import RedisStorage
from tests.cutoff import index_cut
from tests.helpers import Captured, unique, until_lock_lapses
from tests.recovery.conftest import Shared

CLUSTER_LANE = True
SWEEPS = 300
"""Sweeps whose record passes go round the whole test keyspace at least once."""


class Order(msgspec.Struct):
    n: int


def _flow() -> rf.Reactor:
    flow = rf.Reactor(unique("reindex"), inputs=Order)

    @flow.step
    async def double(n: int) -> int:
        return 2 * n

    return flow


def _configure(storage: rf.Storage) -> None:
    rf.configure(storage=storage, lock_ttl=1.0, stall_timeout=0.5)


@asynccontextmanager
async def _cut_dispatch(shared: Shared, flow: rf.Reactor, key: str,
                        captured: Captured) -> AsyncIterator[str]:
    """A dispatch with idempotency key `key` that stored its run, lost the run's index entries
    and never enqueued it; the run's id (its start's lock lapsed, the shared storage configured
    again)."""
    storage = shared.storage
    assert isinstance(storage, RedisStorage)
    if "+cluster" in shared.url:
        async with index_cut(shared.url, shared.namespace) as cut:
            _configure(cut)
            with pytest.raises(StorageError):  # stored; its index writes refused
                await flow.dispatch(n=21, idempotency_key=key)
        _configure(storage)
        run_id = await _stored_run(storage, flow)
        await until_lock_lapses(storage, run_id)  # the start died holding it
    else:
        run = await flow.dispatch(n=21, idempotency_key=key)
        run_id = run.id
        captured.jobs.clear()  # the start died before its job reached the broker
        conn = await storage._redis.get()
        await conn.client.zrem(storage._keys.by_status(flow.name, "running"), run_id)
        await conn.client.zrem(storage._keys.by_reactor(flow.name), run_id)
    assert (await storage.scan_status(["running"], 1000)) == []
    await anyio.sleep(0.6)  # past stall_timeout since its last write
    yield run_id


async def _stored_run(storage: RedisStorage, flow: rf.Reactor) -> str:
    """The id of the one run of `flow` stored in the namespace (read from the keyspace, as
    nothing else leads to it)."""
    conn = await storage._redis.get()
    prefix = f"{storage._keys.ns}:run:{{"
    keys = [key async for key in conn.client.scan_iter(match=prefix + "*}")]
    assert len(keys) == 1
    return bytes(keys[0]).decode()[len(prefix):-1]


async def test_the_sweeper_finds_and_recovers_a_dispatch_cut_off_before_its_index_writes(
        shared: Shared, captured: Captured, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeper, "RECORD_PASS_INTERVAL", 0.0, raising=False)  # every sweep
    flow = _flow()
    async with _cut_dispatch(shared, flow, "order-1", captured) as run_id:
        reports = []
        for _ in range(SWEEPS):  # each sweep's record pass reads the next stretch
            reports.append(await rf.sweep_once())
            if reports[-1].recovered:
                break

        assert [r.recovered for r in reports if r.recovered] == [[run_id]]
        assert [r.reindexed for r in reports if r.reindexed] == [[run_id]]
        done = await flow.get(run_id)
        assert done.status is rf.Status.COMPLETED and done.value == 42
        assert [r.id for r in (await flow.list_runs()).runs] == [run_id]


async def test_a_retry_with_the_same_key_repairs_the_index_and_enqueues_the_run(
        shared: Shared, captured: Captured) -> None:
    flow = _flow()
    async with _cut_dispatch(shared, flow, "order-2", captured) as run_id:
        replay = await flow.dispatch(n=21, idempotency_key="order-2")

        assert replay.id == run_id and replay.replayed
        assert replay.status is rf.Status.RUNNING
        assert captured.jobs == [Job(JobKind.RUN, run_id, flow.name)]
        assert [live.run_id for live in await shared.storage.scan_status(["running"], 1000)
                ] == [run_id]  # the sweeper's index scans find it again
        await jobs.execute_run(run_id, flow.name)
        done = await flow.get(run_id)
        assert done.status is rf.Status.COMPLETED and done.value == 42

        again = await flow.dispatch(n=21, idempotency_key="order-2")  # nothing left to repair
        assert again.id == run_id and captured.jobs == [Job(JobKind.RUN, run_id, flow.name)]
