"""OpenTelemetry metrics (`OpenTelemetryMiddleware(metrics=True)`, api.md §16), read through the
SDK's in-memory reader after real runs under the test kit: runs started and ended, step
durations and retries, a gated step's wait, a timer's lateness, and jobs waiting per queue on a
real broker (the embedded StubBroker, and a RedisBroker on the suite's redis-server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import anyio
import msgspec
import pytest
from dramatiq.brokers.redis import RedisBroker
from dramatiq.brokers.stub import StubBroker
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import reactorflow as rf
from reactorflow.otel import OpenTelemetryMiddleware
from reactorflow.testing import Environment
from reactorflow.workers import backlog
from reactorflow.workers import broker as broker_jobs
from reactorflow.workers.broker import QUEUE, actors_for
from tests.helpers import unique


class Who(msgspec.Struct):
    who: str


@pytest.fixture
def reader() -> Iterator[tuple[InMemoryMetricReader, MeterProvider]]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield reader, provider
    provider.shutdown()


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """The data points of the instrument `name` collected now."""
    data = reader.get_metrics_data()
    found: list[Any] = []
    for resource in data.resource_metrics if data is not None else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found += list(metric.data.data_points)
    return found


def by_attrs(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    return {tuple(sorted(p.attributes.items())): p for p in points(reader, name)}


async def test_runs_steps_and_retries_are_counted_after_real_runs(
        reader: tuple[InMemoryMetricReader, MeterProvider]) -> None:
    metrics, provider = reader
    good = rf.Reactor(unique("m-good"))
    bad = rf.Reactor(unique("m-bad"))

    @good.step
    async def one() -> int:
        return 1

    @good.interrupt
    async def approve(payload: int, one: int) -> int:
        return payload

    @good.step
    async def two(approve: int) -> int:
        return 2

    @bad.step(retries=rf.Retry(3, 0))
    async def flaky() -> int:
        raise OSError("down")

    middleware = OpenTelemetryMiddleware(metrics=True, meter_provider=provider)
    async with Environment(middleware=[middleware]):
        paused = await good.run()
        assert paused.status is rf.Status.PAUSED
        done = await good.continue_(paused.id, step="approve", payload=7)
        assert done.status is rf.Status.COMPLETED
        failed = await bad.run()
        assert failed.status is rf.Status.FAILED

    started = by_attrs(metrics, "reactorflow.runs.started")
    assert started[(("reactor", good.name),)].value == 1  # the resume is no second start
    assert started[(("reactor", bad.name),)].value == 1
    ended = by_attrs(metrics, "reactorflow.runs.ended")
    assert ended[(("reactor", good.name), ("status", "completed"))].value == 1
    assert ended[(("reactor", bad.name), ("status", "failed"))].value == 1
    assert not any(dict(key).get("status") == "paused" for key in ended)  # not an end

    retries = by_attrs(metrics, "reactorflow.step.retries")
    assert retries[(("reactor", bad.name), ("step", "flaky"))].value == 2
    durations = by_attrs(metrics, "reactorflow.step.duration")
    assert durations[(("reactor", bad.name), ("status", "retrying"),
                      ("step", "flaky"))].count == 2
    assert durations[(("reactor", bad.name), ("status", "failed"), ("step", "flaky"))].count == 1
    for step in ("one", "two"):
        point = durations[(("reactor", good.name), ("status", "completed"), ("step", step))]
        assert point.count == 1 and point.sum >= 0


async def test_a_gated_step_records_how_long_it_waited_for_its_gate(
        reader: tuple[InMemoryMetricReader, MeterProvider]) -> None:
    metrics, provider = reader
    flow = rf.Reactor(unique("m-gated"), inputs=Who)
    holding = anyio.Event()
    let_go = anyio.Event()

    @flow.step(gates=[rf.Lock("m-gated-lock", wait=600)])
    async def exclusive(who: str) -> str:
        if who == "first":
            holding.set()
            await let_go.wait()
        return who

    middleware = OpenTelemetryMiddleware(metrics=True, meter_provider=provider)
    async with Environment(middleware=[middleware]) as env, anyio.create_task_group() as tg:
        async def first() -> None:
            assert (await flow.run(who="first")).ok

        tg.start_soon(first)
        await holding.wait()

        async def second() -> None:
            assert (await flow.run(who="second")).ok

        tg.start_soon(second)
        await anyio.sleep(0.05)
        await env.clock.advance(5)  # the second waits meanwhile (fake time)
        let_go.set()

    [point] = points(metrics, "reactorflow.gate.wait")
    assert dict(point.attributes) == {"reactor": flow.name, "gate": "lock"}
    assert point.count == 2  # each run acquired it once
    assert point.max >= 5  # the second waited for the first


async def test_a_timer_firing_records_its_lateness(
        reader: tuple[InMemoryMetricReader, MeterProvider]) -> None:
    metrics, provider = reader
    flow = rf.Reactor(unique("m-timer"))

    @flow.sleep
    async def nap() -> timedelta:
        return timedelta(seconds=30)

    @flow.step
    async def after(nap: object) -> int:
        return 1

    middleware = OpenTelemetryMiddleware(metrics=True, meter_provider=provider)
    async with Environment(middleware=[middleware]) as env:
        run = await flow.run()
        assert run.status is rf.Status.RUNNING
        assert points(metrics, "reactorflow.timer.lateness") == []
        await env.clock.advance(31)
        await env.drain()
        assert (await flow.get(run.id)).ok

    [point] = points(metrics, "reactorflow.timer.lateness")
    assert dict(point.attributes) == {"reactor": flow.name}
    assert point.count == 1 and point.min >= 0


def test_jobs_waiting_per_queue_are_observed_on_the_embedded_broker(
        reader: tuple[InMemoryMetricReader, MeterProvider]) -> None:
    metrics, provider = reader
    OpenTelemetryMiddleware(metrics=True, meter_provider=provider)
    broker = StubBroker()
    rf.configure(broker=broker)
    try:
        for n in range(3):
            broker_jobs.enqueue_run(f"run-{n}", "nobody")
        assert backlog.waiting_jobs() == {QUEUE: 3}
        [point] = points(metrics, "reactorflow.queue.waiting")
        assert dict(point.attributes) == {"queue": QUEUE} and point.value == 3
    finally:
        rf.configure(broker=None)
        broker.close()


def test_jobs_waiting_are_counted_on_a_redis_broker(redis_url: str) -> None:
    namespace = f"rf-test-{uuid.uuid4().hex[:8]}"
    broker = RedisBroker(url=redis_url, namespace=namespace)  # type: ignore[no-untyped-call]
    rf.configure(broker=broker)
    try:
        actors_for(broker)
        assert backlog.waiting_jobs() == {QUEUE: 0}
        for n in range(2):
            broker_jobs.enqueue_run(f"run-{n}", "nobody")
        broker_jobs.enqueue_run("later", "nobody", delay=60)
        assert backlog.waiting_jobs() == {QUEUE: 2}  # the delayed one is not due yet
    finally:
        rf.configure(broker=None)
        broker.flush_all()
        broker.close()


def test_no_broker_in_use_reports_no_queue() -> None:
    rf.configure(broker=None)
    assert isinstance(backlog.waiting_jobs(), dict)  # never makes one to look


def test_a_meter_provider_without_metrics_is_refused_naming_the_option(
        reader: tuple[InMemoryMetricReader, MeterProvider]) -> None:
    _, provider = reader
    with pytest.raises(rf.ReactorflowError, match="metrics=True"):
        OpenTelemetryMiddleware(meter_provider=provider)
