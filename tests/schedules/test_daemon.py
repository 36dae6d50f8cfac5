"""The scheduler daemon (`run_forever`): it sleeps until the next tick, and survives a storage
outage (a real redis-server stopped and started again)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.runtime.services import scheduler
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import redis_namespace
from tests.recovery.test_sweep_resilience import Server, server  # noqa: F401 - the fixture
from tests.schedules.conftest import Clock


def minutely() -> rf.Reactor:
    flow = rf.Reactor(f"daemon-{uuid.uuid4().hex[:8]}",
                      schedules=[rf.Schedule("* * * * *"), rf.Schedule("0 * * * *")])

    @flow.step
    async def tick() -> str:
        return "ok"

    return flow


class Sleeps:
    """The daemon's waits: recorded, and the clock moved by each (no real time passes)."""

    def __init__(self, clock: Clock, limit: int = 1_000_000) -> None:
        self.clock = clock
        self.limit = limit
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if len(self.waits) >= self.limit:
            await anyio.sleep_forever()  # the test ends the daemon here
        self.clock.advance(seconds=seconds)
        await anyio.sleep(0)


async def until(check: Callable[[], bool], what: str) -> None:
    with anyio.fail_after(30):
        while not check():
            await anyio.sleep(0.01)  # condition polling, not a timing assumption
    assert check(), what


async def test_the_daemon_sleeps_until_the_next_tick(memory: rf.Storage, clock: Clock,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    flow = minutely()
    sleeps = Sleeps(clock, limit=4)
    monkeypatch.setattr(scheduler, "sleep", sleeps)
    started: list[rf.Run] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: scheduler.run_forever(reactors=[flow],
                                                         on_started=started.extend))
        await until(lambda: len(sleeps.waits) >= 4, "four passes")
        tg.cancel_scope.cancel()
    # 00:00:30 -> just past 00:01, then a minute each time: never a one-second poll
    assert sleeps.waits[0] == pytest.approx(30.001)
    assert sleeps.waits[1:4] == [pytest.approx(60.0, abs=0.01)] * 3
    assert len(started) == 3  # one run per minute tick (the hourly one is not due)
    for run in started:
        await flow.wait(run.id, timeout=30)


async def test_the_daemon_survives_a_redis_outage(server: Server, clock: Clock,  # noqa: F811
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    await server.ready()
    storage = RedisStorage.from_url(server.url, namespace=redis_namespace(),
                                    socket_connect_timeout=0.5, socket_timeout=0.5)
    rf.configure(storage=storage)
    flow = minutely()
    sleeps = Sleeps(clock)
    monkeypatch.setattr(scheduler, "sleep", sleeps)
    started: list[rf.Run] = []

    def logged(name: str) -> bool:
        return any(name in r.getMessage() for r in caplog.records)

    try:
        with caplog.at_level(logging.INFO, logger="reactorflow.schedule"):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: scheduler.run_forever(
                    reactors=[flow], on_started=started.extend, backoff=1, backoff_cap=4))
                await until(lambda: len(started) >= 1, "a run before the outage")
                server.stop()
                await until(lambda: logged("reactorflow.schedule.failed attempt=2"),
                            "two failed passes logged")
                server.start()
                await server.ready()
                await until(lambda: logged("reactorflow.schedule.resumed"), "resumed")
                before = len(started)
                await until(lambda: len(started) > before, "a run after the outage")
                tg.cancel_scope.cancel()
        failures = [r for r in caplog.records if "reactorflow.schedule.failed" in r.getMessage()]
        assert "StorageConnectionError" in failures[0].getMessage()
        assert [w for w in sleeps.waits if w in (1, 2, 4)][:2] == [1, 2]  # the backoff doubles
    finally:
        config.reset()
        await storage.aclose()
