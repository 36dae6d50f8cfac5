"""A sweep looks at up to `limit` live runs; where more exist, none may be left out for good.

Running and rolling-back runs are scanned apart from paused ones, so a backlog of paused runs
never hides a stalled run; and a scan with more candidates than `limit` starts at a random
point, so successive sweeps see every run. (Before, each sweep read the same first `limit`
runs, reactor by reactor: a stalled run or an overdue interrupt behind them waited forever.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.runtime.engine.execution import new_state
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import unfired, unique
from tests.recovery.test_corrupt import _hanging_flow, _stalled_run

LIMIT = 3
CROWD = 6  # runs ahead of the one that matters: twice the limit
SWEEPS = 60  # a window of 3 of 7 misses one run 60 times in a row with p = (4/7)^60 < 1e-14


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    async for backend in on_every(request):
        yield backend


async def _crowd(storage: rf.Storage, status: rf.Status, *, locked: bool) -> None:
    """CROWD runs of a reactor whose name sorts first, stored before the run under test:
    `locked`, each held by a live execution (nothing for a sweep to do); else left alone."""
    reactor = unique("aa-crowd")
    for i in range(CROWD):
        run_id = f"crowd-{reactor}-{i}"
        meta = records.RunMeta(records.SCHEMA_VERSION, run_id, reactor, 1.0, records.raw({}), {})
        assert await storage.create_run(run_id, reactor=reactor, status=status,
                                        meta=records.encode(meta),
                                        state=records.encode(new_state(status)),
                                        created_at=1.0 + i, owner="crowd", lock_ttl=600.0)
        if not locked:
            assert await storage.release_lock(run_id, "crowd") == 0


async def _stalled(storage: rf.Storage) -> str:
    entered, log = anyio.Event(), []
    run_id = await _stalled_run(storage, _hanging_flow(entered, log), entered)
    rf.configure(stall_timeout=0.05)
    await anyio.sleep(0.1)
    return run_id


async def test_paused_runs_past_the_limit_never_hide_a_stalled_run(storage: rf.Storage) -> None:
    await _crowd(storage, rf.Status.PAUSED, locked=False)
    run_id = await _stalled(storage)

    report = await rf.sweep_once(limit=LIMIT)

    assert report.recovered == [run_id]  # in the first sweep: running runs are scanned apart
    assert len(report.skipped) == LIMIT  # and paused ones still, up to the limit


async def test_live_runs_past_the_limit_leave_a_stalled_run_to_a_later_sweep(
        storage: rf.Storage) -> None:
    await _crowd(storage, rf.Status.RUNNING, locked=True)
    run_id = await _stalled(storage)

    sweeps = 0
    while sweeps < SWEEPS:
        sweeps += 1
        report = await rf.sweep_once(limit=LIMIT)
        assert report.recovered in ([], [run_id])
        if report.recovered:
            break
    assert report.recovered == [run_id], f"not found in {SWEEPS} sweeps"
    assert (await storage.load_head(run_id)).status == "completed"  # type: ignore[union-attr]


async def test_an_overdue_interrupt_past_the_limit_expires_in_a_later_sweep(
        storage: rf.Storage) -> None:
    await _crowd(storage, rf.Status.PAUSED, locked=False)
    flow = rf.Reactor(unique("zz-expires"))

    @flow.step
    async def first() -> int:
        return 1

    @flow.interrupt(timeout=0.5)  # time enough to void its timer first, under load too
    async def approve(payload: int, first: int) -> int:
        return payload

    paused = await flow.run()
    await unfired(paused)
    assert paused.status is rf.Status.PAUSED
    await anyio.sleep(0.6)

    for _ in range(SWEEPS):
        report = await rf.sweep_once(limit=LIMIT)
        if report.expired:
            break
    assert report.expired == [paused.id], f"not expired in {SWEEPS} sweeps"
    assert (await flow.get(paused.id)).status is rf.Status.FAILED
