"""An undo is never lost to contention: rolling back a gated step with `wait=0` while another
run holds its semaphore waits for the place (within the gate's TTL), then runs the undo."""

from __future__ import annotations

import threading

import anyio
import msgspec

import reactorflow as rf
from tests.helpers import unique


class Order(msgspec.Struct):
    order_id: str
    fail: bool


async def test_an_undo_waits_for_its_semaphore_held_by_another_run(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("contended"), inputs=Order)
    gate = rf.Semaphore(unique("payments"), limit=1, wait=0, ttl=30)
    log: list[str] = []
    holding, let_go, go = anyio.Event(), anyio.Event(), anyio.Event()

    @flow.step(gates=[gate])
    async def pay(order_id: str, fail: bool) -> str:
        log.append(f"pay {order_id}")
        if not fail:  # the other run: holds the semaphore until told to let go
            holding.set()
            await let_go.wait()
            log.append(f"let go {order_id}")
        return order_id

    @pay.undo
    async def refund(result: str) -> None:
        log.append(f"refund {result}")

    @flow.step
    async def ship(pay: str, fail: bool) -> str:
        if fail:
            await go.wait()  # fails once the other run holds the semaphore
            raise RuntimeError("courier refused")
        return pay

    ended: dict[str, rf.Run] = {}

    async def start(order_id: str, fail: bool) -> None:
        ended[order_id] = await flow.run(order_id=order_id, fail=fail)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start, "A", True)
            while "pay A" not in log:
                await anyio.sleep(0.01)
            tg.start_soon(start, "B", False)
            await holding.wait()  # B holds the only place now
            go.set()  # A fails: its rollback needs pay's semaphore, which B holds
            while "A" not in ended and not (
                    await flow.list_runs(status=rf.Status.ROLLING_BACK)).runs:
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)  # lets A reach its undo while B still holds the place
            let_go.set()

    failed = ended["A"]
    assert failed.status is rf.Status.FAILED and failed.error is not None
    assert failed.error.type == "RuntimeError"
    assert failed.error.rollback_failures == []  # the undo was not lost to contention
    assert failed.steps["pay"].status == "undone"
    assert ended["B"].status is rf.Status.COMPLETED
    assert log.index("let go B") < log.index("refund A")  # it waited for its place


async def test_a_workers_undo_parks_for_its_semaphore_and_runs_once_it_is_handed_over(
        storage: rf.Storage) -> None:
    """In a worker (the in-process queue here) the undo does not hold the worker's job while
    another run holds its semaphore: the run parks `rolling_back`, lock released, queued for
    the place; the release hands it over and the next try runs the undo."""
    rf.configure(gate_snooze=0.05)
    flow = rf.Reactor(unique("parked-undo"), inputs=Order)
    gate = rf.Semaphore(unique("payments"), limit=1, wait=0, ttl=30)
    log: list[str] = []  # (appended from the queue's thread too)
    go = threading.Event()
    holding, let_go = anyio.Event(), anyio.Event()

    @flow.step(gates=[gate])
    async def pay(order_id: str, fail: bool) -> str:
        log.append(f"pay {order_id}")
        if not fail:  # the other run, in this process: holds the semaphore until told to
            holding.set()
            await let_go.wait()
            log.append(f"let go {order_id}")
        return order_id

    @pay.undo
    async def refund(result: str) -> None:
        log.append(f"refund {result}")

    @flow.step
    async def ship(pay: str, fail: bool) -> str:
        if fail:
            while not go.is_set():  # in the worker: fails once the other run holds the place
                await anyio.sleep(0.005)
            raise RuntimeError("courier refused")
        return pay

    other: list[rf.Run] = []

    async def hold() -> None:
        other.append(await flow.run(order_id="B", fail=False))

    with anyio.fail_after(20):
        a = await flow.dispatch(order_id="A", fail=True)
        while (await flow.get(a.id)).steps["pay"].status != "completed":
            await anyio.sleep(0.005)
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await holding.wait()  # B holds the only place now
            go.set()  # A fails in the worker: its undo needs the place B holds
            while not any(e.kind == "run.parked" and e.step == "pay"
                          for e in (await flow.get(a.id)).history):
                await anyio.sleep(0.01)
            parked = await flow.get(a.id)
            assert parked.status is rf.Status.ROLLING_BACK
            assert await storage.lock_owner(a.id) is None  # nothing holds the run meanwhile
            assert "refund A" not in log
            let_go.set()
        failed = await flow.wait(a.id, timeout=15)

    assert failed.status is rf.Status.FAILED and failed.error is not None
    assert failed.error.type == "RuntimeError"
    assert failed.error.rollback_failures == []  # the undo was not lost to contention
    assert failed.steps["pay"].status == "undone"
    assert other[0].status is rf.Status.COMPLETED
    assert log.index("let go B") < log.index("refund A") and log.count("refund A") == 1
