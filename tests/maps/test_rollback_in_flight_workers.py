"""A fanned-out map whose run is cancelled while its elements run in a real `reactorflow worker`
subprocess, then undone (issue 22, item 3; the in-process lane:
tests/maps/test_rollback_in_flight.py). No element starts after the cancel, and every element
that ran is undone exactly once: the notes file is the side-effect ledger, written by the
worker's element bodies and by whichever process runs the undos."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import config, records
from tests.workers.test_real_workers import Shared, Workers, gates, shared
from tests.workflows import background as bg
from tests.workflows import inflight

pytestmark = pytest.mark.slow
__all__ = ["gates", "shared"]  # fixtures, used by name
ITEMS = [0, 1, 2, 3]  # batch_size 2: elements 0 and 1 are out, 2 and 3 wait for their turn


def _noted(shared: Shared, kind: str) -> list[int]:
    return sorted(int(line.split()[1]) for line in bg.notes(shared.log)
                  if line.startswith(f"{kind} "))


async def test_a_run_cancelled_with_elements_in_a_worker_starts_none_and_undoes_each_once(
        shared: Shared, gates: Path) -> None:
    storage = config.current_storage()
    workers = Workers(shared, gates, module="tests.workflows.inflight", threads=4)
    try:
        run = await inflight.charges.run(items=ITEMS)
        assert run.status is rf.Status.RUNNING  # parked at the map: the worker runs it
        with anyio.fail_after(30):
            while _noted(shared, "charge") != [0, 1]:
                await anyio.sleep(0.01)
        cancelled = await inflight.charges.cancel(run.id, reason="customer called")
        assert cancelled.status is rf.Status.CANCELLED
        ended: list[rf.Run] = []

        async def undo() -> None:
            ended.append(await inflight.charges.undo(run.id))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(undo)  # waits for the elements still out in the worker
                while not ended and (await inflight.charges.get(run.id)).status is not (
                        rf.Status.ROLLING_BACK):
                    await anyio.sleep(0.01)
                (gates / inflight.CHARGE_GATE).touch()  # the elements in flight finish
        with anyio.fail_after(30):  # both elements' jobs settled their slots
            while await storage.count_elements(run.id, "charge") < 2:
                await anyio.sleep(0.01)
        slots = await storage.load_elements(run.id, "charge", 0, len(ITEMS))
    finally:
        workers.stop()  # lets the jobs in flight finish (a successor would start by then)
    assert ended[0].status is rf.Status.CANCELLED, ended[0].error
    assert ended[0].steps["charge"].status == "undone"
    assert _noted(shared, "charge") == [0, 1]  # nothing started after the cancel
    assert _noted(shared, "charged") == [0, 1]
    assert _noted(shared, "refund") == [0, 1]  # every element that ran is undone, once
    assert [records.decode_element(raw).status if raw else None for raw in slots] == [
        "undone", "undone", None, None]
