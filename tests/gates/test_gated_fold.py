"""A run holding reactor gates folds its last step into its final save like any run; a cancel
or fail request that came while that step ran refuses the save, and the gates stay held until
the run's real final state (through the rollback the request starts). Both backends."""

from __future__ import annotations

import anyio
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.records import Control, ControlKind, RunError
from reactorflow.storage.contract.values import GateTake
from tests.helpers import unique

pytestmark = pytest.mark.usefixtures("storage")


async def test_a_fail_request_during_the_last_step_is_rolled_back_under_the_lock(
        storage: rf.Storage) -> None:
    key = unique("fold-lock")
    flow = rf.Reactor(unique("gated.fold"), gates=[rf.Lock(key)])
    entered, release = anyio.Event(), anyio.Event()
    seen_in_undo: list[GateTake] = []

    @flow.step
    async def first() -> int:
        return 1

    @first.undo
    async def unfirst(result: int) -> None:
        seen_in_undo.append(await storage.gate_acquire(key, "another", limit=1, ttl=30))

    ids: list[str] = []

    @flow.step
    async def last(first: int, ctx: rf.StepContext) -> int:
        ids.append(ctx.run_id)
        entered.set()
        await release.wait()
        return first + 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        with anyio.fail_after(20):
            await entered.wait()
        run_id = ids[0]
        request = Control(ControlKind.FAIL, "failed from outside",
                          RunError(None, "Outside", "failed from outside"))
        assert await storage.request_control(run_id, records.encode(request))
        release.set()
    final = await flow.get(run_id)
    assert final.status is rf.Status.FAILED and final.error is not None
    assert final.error.type == "Outside"
    assert final.steps["last"].status == "completed"  # stored once the save was refused
    assert final.steps["first"].status == "undone"
    assert seen_in_undo == [GateTake.BUSY]  # the run still held its lock while rolling back
    assert await storage.gate_holders(key) == []  # given back at the final state


async def test_a_locked_run_completes_and_frees_its_lock(storage: rf.Storage) -> None:
    key = unique("fold-lock")
    flow = rf.Reactor(unique("gated.done"), gates=[rf.Lock(key)])

    @flow.step
    async def only() -> int:
        return 7

    run = await flow.run()
    assert run.status is rf.Status.COMPLETED and run.value == 7
    assert run.steps["only"].status == "completed"
    assert await storage.gate_holders(key) == []
    assert await storage.gate_acquire(key, "next", limit=1, ttl=30) is GateTake.ACQUIRED
