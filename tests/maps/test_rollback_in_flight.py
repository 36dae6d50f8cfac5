"""A fanned-out map rolled back while its element jobs are still out (real element jobs in flight
on the in-process queue when the rollback begins): the rollback waits for them, so every
element that ran is undone exactly once; and no element starts once the run stopped going
forward (its chain claims no successor), whether it rolls back or was cancelled. (On a real
`reactorflow worker` subprocess: tests/maps/test_rollback_in_flight_workers.py.)"""

from __future__ import annotations

import threading

import anyio
import msgspec

import reactorflow as rf
from reactorflow import records
from reactorflow.runtime.engine.map_slot_keys import job_key
from reactorflow.runtime.maps.fanout import NEXT
from tests.helpers import unique

ITEMS = [0, 1, 2, 3]  # batch_size 2: elements 0 and 1 are out, 2 and 3 wait for their turn


class Items(msgspec.Struct):
    items: list[int]
    fail: bool = True


class Charges:
    """A map whose elements hang until released (they run in the queue's thread)."""

    def __init__(self, *, failing_sibling: bool) -> None:
        self.log: list[str] = []  # (list.append is atomic across threads)
        self.release = threading.Event()
        self.flow = rf.Reactor(unique("inflight"), inputs=Items)

        @self.flow.map_step(over="items", fan_out=True, batch_size=2)
        async def charge(item: int) -> int:
            self.log.append(f"charge {item}")
            while not self.release.is_set():
                await anyio.sleep(0.005)
            return item

        @charge.undo
        async def refund(result: int, item: int) -> None:
            self.log.append(f"refund {item}")

        if failing_sibling:
            @self.flow.step
            async def screen(items: list[int], fail: bool) -> None:
                while not self.out():  # fails while both elements are in flight
                    await anyio.sleep(0.005)
                if fail:
                    raise RuntimeError("fraud suspected")

    def out(self) -> bool:
        return {"charge 0", "charge 1"} <= set(self.log)

    def of(self, kind: str) -> list[int]:
        return sorted(int(line.split()[1]) for line in self.log if line.startswith(kind))


async def _settled(storage: rf.Storage, run_id: str) -> None:
    """Until elements 0 and 1 hold their outcome (their settle also advanced the dispatch
    counter, in the same atomic write, unless the map was closed)."""
    with anyio.fail_after(30):
        while await storage.count_elements(run_id, "charge") < 2:
            await anyio.sleep(0.01)


async def _check(storage: rf.Storage, charges: Charges, run_id: str) -> None:
    assert charges.of("charge") == [0, 1]  # nothing started after the rollback began
    assert charges.of("refund") == [0, 1]  # every element that ran is undone, once
    slots = await storage.load_elements(run_id, "charge", 0, len(ITEMS))
    assert [records.decode_element(raw).status if raw else None for raw in slots] == [
        "undone", "undone", None, None]
    counter = (await storage.load_elements(run_id, job_key("charge"), NEXT, 1))[0]
    assert counter == b"2"  # the late settles claimed no successor


async def test_a_failure_while_elements_are_in_flight_waits_for_them_and_undoes_them(
        storage: rf.Storage) -> None:
    charges = Charges(failing_sibling=True)
    run = await charges.flow.run(items=ITEMS)
    # the sibling failed while both elements ran: the rollback waits for them, parked
    assert run.status is rf.Status.ROLLING_BACK, run.status
    charges.release.set()
    done = await charges.flow.wait(run.id, timeout=30)
    await _settled(storage, run.id)
    assert done.status is rf.Status.FAILED and done.error is not None
    assert done.error.type == "RuntimeError" and done.error.rollback_failures == []
    assert done.steps["charge"].status == "undone"
    await _check(storage, charges, run.id)


async def test_an_undo_of_a_run_cancelled_with_elements_in_flight_waits_for_them(
        storage: rf.Storage) -> None:
    charges = Charges(failing_sibling=False)
    run = await charges.flow.run(items=ITEMS)
    assert run.status is rf.Status.RUNNING  # parked at the map
    with anyio.fail_after(30):
        while not charges.out():
            await anyio.sleep(0.005)
    cancelled = await charges.flow.cancel(run.id, reason="customer called")
    assert cancelled.status is rf.Status.CANCELLED
    ended: list[rf.Run] = []

    async def undo() -> None:
        ended.append(await charges.flow.undo(run.id))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(undo)  # waits in this process for the elements still out
            while not ended and (await charges.flow.get(run.id)).status is not (
                    rf.Status.ROLLING_BACK):
                await anyio.sleep(0.005)
            charges.release.set()
    await _settled(storage, run.id)
    assert ended[0].status is rf.Status.CANCELLED
    assert ended[0].steps["charge"].status == "undone"
    await _check(storage, charges, run.id)
