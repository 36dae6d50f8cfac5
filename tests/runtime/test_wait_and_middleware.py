"""`wait` is notified (also across threads and event loops); middleware is isolated."""

from __future__ import annotations

import logging
import threading

import anyio
import pytest

import reactorflow as rf
from reactorflow.runtime.ops import operations
from tests.helpers import unique


async def test_wait_is_woken_by_a_run_finishing_in_another_thread(
        storage: rf.Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Woken by the run's completion notification: the waiter's periodic re-check is switched
    off, so nothing else could wake it."""
    flow = rf.Reactor(unique("threads"))
    started = threading.Event()
    release = threading.Event()
    ids: list[str] = []

    @flow.step
    async def blocking(ctx: rf.StepContext) -> str:
        ids.append(ctx.run_id)
        started.set()
        await anyio.to_thread.run_sync(release.wait)
        return "done"

    def other_thread() -> None:
        anyio.run(flow.run)

    thread = threading.Thread(target=other_thread)
    thread.start()
    try:
        await anyio.to_thread.run_sync(started.wait)
        with pytest.raises(rf.WaitTimeout) as info:
            await flow.wait(ids[0], timeout=0.05)
        assert info.value.status == "running"
        assert isinstance(info.value, TimeoutError)
        read_running = anyio.Event()
        real_get = operations.get

        async def observed_get(reactor: rf.Reactor, run_id: str) -> rf.Run:
            run = await real_get(reactor, run_id)
            if not run.status.is_settled:
                read_running.set()  # the waiter is subscribed and saw the run running
            return run

        monkeypatch.setattr(operations, "get", observed_get)
        monkeypatch.setattr(operations, "recheck_interval", lambda timeout: 3600.0)
        async with anyio.create_task_group() as tg:
            results: list[rf.Run] = []

            async def waiter() -> None:
                with anyio.fail_after(30):  # no deadline of its own, no re-check
                    results.append(await flow.wait(ids[0]))

            tg.start_soon(waiter)
            await read_running.wait()
            release.set()
        assert results[0].status is rf.Status.COMPLETED
        assert results[0].value == "done"
    finally:
        release.set()
        await anyio.to_thread.run_sync(thread.join)


async def test_wait_returns_at_once_for_a_settled_run(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("settled"))

    @flow.step
    async def only() -> int:
        return 7

    run = await flow.run()
    with anyio.fail_after(1):
        again = await flow.wait(run.id, timeout=10)
    assert again.value == 7


async def test_broken_middleware_is_logged_and_isolated(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(rf.Middleware):
        def before_step(self, event: rf.StepEvent) -> None:
            raise RuntimeError("observer bug")

    calls: list[str] = []

    class Counting(rf.Middleware):
        def after_step(self, event: rf.StepEvent) -> None:
            calls.append(event.step)

    rf.configure(middleware=[Broken(), Counting()])
    flow = rf.Reactor(unique("mw"))

    @flow.step
    async def only() -> int:
        return 1

    with caplog.at_level(logging.ERROR, logger="reactorflow.middleware"):
        run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert calls == ["only"]
    assert any("reactorflow.middleware.failed" in r.getMessage() and "before_step" in
               r.getMessage() for r in caplog.records)


async def test_logs_use_event_names_and_fields(storage: rf.Storage,
                                               caplog: pytest.LogCaptureFixture) -> None:
    flow = rf.Reactor(unique("logs"))

    @flow.step
    async def only() -> int:
        raise ValueError("nope")

    with caplog.at_level(logging.INFO, logger="reactorflow"):
        run = await flow.run()
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("reactorflow.run.started") and f"run_id={run.id}" in m
               for m in messages)
    assert any(m.startswith("reactorflow.step.failed") and "step=only" in m for m in messages)
    assert any(m.startswith("reactorflow.run.failed") for m in messages)
