"""The sync facade (`reactor.sync.*`, `rf.sync.*`): from many real threads at once on both
backends, refused inside a running event loop, usable from a worker thread of a running loop."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.runtime.services import portal
from tests.conftest import make_storage
from tests.helpers import unique

THREADS = 20


class Order(msgspec.Struct):
    item: str
    qty: int


@pytest.fixture(params=["memory", "redis"])
def storage(request: pytest.FixtureRequest) -> Iterator[rf.Storage]:
    """The configured storage, for sync tests: closed on the facade's loop (where its
    connections were opened)."""
    backend = make_storage(request.param, request)
    rf.configure(storage=backend)
    try:
        yield backend
    finally:
        config.reset()
        portal.portal().call(backend.aclose)


def _checkout(threads: set[str]) -> rf.Reactor:
    flow = rf.Reactor(unique("sync-checkout"), inputs=Order)

    @flow.step
    async def reserve(item: str, qty: int) -> str:
        threads.add(threading.current_thread().name)
        return f"{qty}x{item}"

    @flow.interrupt
    async def approve(payload: bool, reserve: str) -> bool:
        return payload

    @flow.step
    async def ship(reserve: str, approve: bool) -> str:
        return f"shipped {reserve}" if approve else f"held {reserve}"

    return flow


def _quick() -> rf.Reactor:
    flow = rf.Reactor(unique("sync-quick"), inputs=Order)

    @flow.step
    async def total(item: str, qty: int) -> str:
        return f"{item}*{qty}"

    return flow


def _in_threads(count: int, body: Callable[[int], Any]) -> list[Any]:
    """`body(i)` in `count` real threads released together; their results, in order (a
    thread's exception is re-raised here)."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            barrier.wait()
            results[index] = body(index)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers), "a sync call never returned"
    if errors:
        raise errors[0]
    return results


def test_twenty_threads_start_steer_and_read_runs_at_once(storage: rf.Storage) -> None:
    threads: set[str] = set()
    checkout, quick = _checkout(threads), _quick()

    def body(index: int) -> tuple[str, str, str]:
        item = f"item-{index}"
        paused = checkout.sync.run(item=item, qty=index)
        assert paused.status is rf.Status.PAUSED, paused.status
        assert checkout.sync.ready_interrupts(paused.id) == ["approve"]
        done = checkout.sync.continue_(paused.id, step="approve", payload=index % 2 == 0)
        assert done.status is rf.Status.COMPLETED, done.error
        assert checkout.sync.get(done.id).value == done.value
        read = rf.sync.get_run(done.id)
        assert (read.id, read.value, read.inputs) == (done.id, done.value,
                                                       Order(item=item, qty=index))
        dispatched = quick.sync.dispatch(Order(item=item, qty=index))
        settled = quick.sync.wait(dispatched.id, timeout=30)
        assert settled.status is rf.Status.COMPLETED, settled.error
        return done.id, str(done.value), str(settled.value)

    results = _in_threads(THREADS, body)

    for index, (_, value, quick_value) in enumerate(results):
        reserved = f"{index}x{f'item-{index}'}"
        assert value == (f"shipped {reserved}" if index % 2 == 0 else f"held {reserved}")
        assert quick_value == f"item-{index}*{index}"
    assert len({run_id for run_id, _, _ in results}) == THREADS
    # every `run` executed on the one event-loop thread of the process
    assert threads == {portal.THREAD_NAME}
    listed = checkout.sync.list_runs(limit=THREADS + 5)
    assert sorted(run.id for run in listed.runs) == sorted(run_id for run_id, _, _ in results)
    everywhere = rf.sync.list_runs(reactor=quick.name, status="completed", limit=THREADS + 5)
    assert len(everywhere.runs) == THREADS


def test_cancel_undo_retry_and_correlation_from_sync_code(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("sync-steer"), inputs=Order)
    undone: list[str] = []

    @flow.step
    async def reserve(item: str) -> str:
        return f"rsv-{item}"

    @reserve.undo
    async def release(reserve: str) -> None:
        undone.append(reserve)

    @flow.interrupt(correlation_id=lambda reserve: f"order-{reserve}")
    async def approve(payload: bool, reserve: str) -> bool:
        return payload

    first = flow.sync.run(item="a", qty=1)
    cancelled = flow.sync.cancel(first.id, reason="changed my mind")
    assert cancelled.status is rf.Status.CANCELLED
    again = flow.sync.retry(first.id)
    assert again.status is rf.Status.PAUSED and again.retried_from == first.id
    resumed = flow.sync.continue_by_correlation_id("order-rsv-a", step="approve", payload=True)
    assert (resumed.id, resumed.status) == (again.id, rf.Status.COMPLETED)
    assert flow.sync.undo(resumed.id).status is rf.Status.CANCELLED
    assert undone == ["rsv-a"]


def test_errors_of_the_coroutine_reach_the_sync_caller(storage: rf.Storage) -> None:
    flow = _quick()
    with pytest.raises(rf.InputValidationError) as refused:
        flow.sync.run(item="a", qty="many")
    assert refused.value.field == "qty"
    with pytest.raises(rf.RunNotFound):
        rf.sync.get_run("no-such-run")
    with pytest.raises(rf.NotPaused):
        flow.sync.continue_(flow.sync.run(item="a", qty=1).id, step="approve", payload=True)

    release = threading.Event()
    slow = rf.Reactor(unique("sync-slow"), inputs=Order)

    @slow.step
    async def hold(item: str) -> str:
        await anyio.to_thread.run_sync(release.wait)
        return item

    started = slow.sync.dispatch(item="z", qty=1)
    with pytest.raises(rf.WaitTimeout) as waited:
        slow.sync.wait(started.id, timeout=0.2)
    assert waited.value.run_id == started.id
    release.set()
    assert slow.sync.wait(started.id, timeout=30).value == "z"


REACTOR_CALLS: dict[str, Callable[[rf.Reactor], Any]] = {
    "run": lambda flow: flow.sync.run(item="a", qty=1),
    "dispatch": lambda flow: flow.sync.dispatch(item="a", qty=1),
    "get": lambda flow: flow.sync.get("run-1"),
    "wait": lambda flow: flow.sync.wait("run-1", timeout=1),
    "cancel": lambda flow: flow.sync.cancel("run-1"),
    "undo": lambda flow: flow.sync.undo("run-1"),
    "retry": lambda flow: flow.sync.retry("run-1"),
    "list_runs": lambda flow: flow.sync.list_runs(),
    "continue_": lambda flow: flow.sync.continue_("run-1", step="approve", payload=True),
    "continue_by_correlation_id": lambda flow: flow.sync.continue_by_correlation_id(
        "c-1", step="approve", payload=True),
    "ready_interrupts": lambda flow: flow.sync.ready_interrupts("run-1"),
    "pause": lambda flow: flow.sync.pause("run-1", reason="audit"),
    "resume": lambda flow: flow.sync.resume("run-1"),
    "retry_step": lambda flow: flow.sync.retry_step("run-1", "reserve"),
    "skip_step": lambda flow: flow.sync.skip_step("run-1", "reserve", result="r"),
    "rewind": lambda flow: flow.sync.rewind("run-1", to="reserve"),
}

MODULE_CALLS: dict[str, Callable[[], Any]] = {
    "explain": lambda: rf.sync.explain("run-1"),
    "get_run": lambda: rf.sync.get_run("run-1"),
    "list_runs": rf.sync.list_runs,
    "ordered_peek": lambda: rf.sync.ordered_peek("ledger:1"),
    "ordered_skip": lambda: rf.sync.ordered_skip("ledger:1"),
    "ordered_reset": lambda: rf.sync.ordered_reset("ledger:1"),
    "schedule_once": rf.sync.schedule_once,
    "sweep_once": rf.sync.sweep_once,
    "fire_timers": rf.sync.fire_timers,
    "list_workers": rf.sync.list_workers,
    "forget_subject": lambda: rf.sync.forget_subject("c42"),
    "list_erasures": rf.sync.list_erasures,
}


@pytest.mark.parametrize("method", sorted(REACTOR_CALLS))
async def test_a_reactor_sync_method_is_refused_inside_a_running_loop(
        method: str, memory: rf.Storage) -> None:
    flow = _checkout(set())
    with pytest.raises(rf.SyncInEventLoop) as refused:
        REACTOR_CALLS[method](flow)
    error = refused.value
    assert (error.called, error.instead, error.reactor) == (f"sync.{method}", method, flow.name)
    assert f"await reactor.{method}(...)" in str(error)
    assert isinstance(error, rf.ReactorflowError)
    assert (await flow.list_runs()).runs == []  # nothing was started


@pytest.mark.parametrize("function", sorted(MODULE_CALLS))
async def test_an_rf_sync_function_is_refused_inside_a_running_loop(
        function: str, memory: rf.Storage) -> None:
    with pytest.raises(rf.SyncInEventLoop) as refused:
        MODULE_CALLS[function]()
    error = refused.value
    assert (error.called, error.instead, error.reactor) == (f"rf.sync.{function}",
                                                            f"rf.{function}", None)
    assert f"await rf.{function}(...)" in str(error)


def test_every_run_method_and_top_level_coroutine_has_a_sync_twin() -> None:
    """The facade covers the async surface: each coroutine method of `rf.Reactor` has a
    `.sync` twin, and each coroutine function of `rf` one in `rf.sync`."""
    import inspect

    flow = _quick()
    awaited = {name for name, value in inspect.getmembers(rf.Reactor)
                if inspect.iscoroutinefunction(value) and not name.startswith("_")}
    assert awaited == set(REACTOR_CALLS)
    assert all(callable(getattr(flow.sync, name)) for name in awaited)
    functions = {name for name in rf.__all__ if inspect.iscoroutinefunction(getattr(rf, name))}
    assert functions == set(MODULE_CALLS) == set(rf.sync.__all__)


async def test_a_worker_thread_of_a_running_loop_may_use_the_facade(memory: rf.Storage) -> None:
    """A FastAPI/Starlette `def` handler runs in a worker thread of the server's loop: no loop
    runs in that thread, so the facade works there."""
    flow = _quick()
    run = await anyio.to_thread.run_sync(lambda: flow.sync.run(item="b", qty=2))
    assert run.status is rf.Status.COMPLETED and run.value == "b*2"
    assert (await flow.get(run.id)).value == "b*2"  # the same storage, read from this loop


def test_pause_and_resume_from_sync_code(storage: rf.Storage) -> None:
    """`reactor.sync.pause` / `.resume`: an operator's pause of a run asleep (held by no
    execution), and its resume, from sync code."""
    flow = rf.Reactor(unique("sync-pause"))

    @flow.step
    async def ship() -> str:
        return "parcel"

    @flow.sleep
    async def cool_off(ship: str) -> timedelta:
        return timedelta(hours=1)

    @flow.step
    async def remind(cool_off: datetime) -> str:
        return "reminded"

    asleep = flow.sync.run()
    assert asleep.status is rf.Status.RUNNING
    paused = flow.sync.pause(asleep.id, reason="audit", by="ops")
    assert paused.status is rf.Status.PAUSED
    assert paused.paused_by is not None and paused.paused_by.reason == "audit"
    with pytest.raises(rf.RunStateError, match="ops paused it already"):
        flow.sync.pause(asleep.id)
    resumed = flow.sync.resume(asleep.id)
    assert resumed.status is rf.Status.RUNNING  # asleep again until its deadline
    assert resumed.paused_by is None
    assert flow.sync.cancel(asleep.id).status is rf.Status.CANCELLED
