"""`Storage.count_runs`: runs per (reactor, status) from the status indexes, on every backend
(the Redis Cluster lane included), following each run's status as it moves."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from reactorflow.storage.contract.storage import Storage
from tests.conftest import ALL_BACKENDS, on_every
from tests.storage.test_contract import OWNER, new_run


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


async def test_count_runs_counts_each_reactor_and_status_and_follows_a_move(
        storage: Storage) -> None:
    flow, other = f"flow-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    assert {k: v for k, v in (await storage.count_runs()).items() if k[0] in (flow, other)} == {}
    ids = [await new_run(storage, reactor=flow) for _ in range(3)]
    await new_run(storage, reactor=other, status="paused")
    await storage.save_state(ids[0], OWNER, status="completed", previous_status="running",
                             state=b"done", steps={}, events=[], release=True)

    counts = {k: v for k, v in (await storage.count_runs()).items() if k[0] in (flow, other)}
    assert counts == {(flow, "running"): 2, (flow, "completed"): 1, (other, "paused"): 1}
