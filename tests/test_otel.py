"""OpenTelemetry spans, checked with the SDK's in-memory exporter: a span per execution, per step
attempt and per rollback action with the contract's attributes; errors recorded; a dispatched run
continues its trace in a worker (the test kit's queue, and the embedded Dramatiq worker)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import reactorflow as rf
from reactorflow.otel import OpenTelemetryMiddleware
from reactorflow.testing import Environment
from tests.helpers import configured, unique


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    provider.shutdown()


class _OnRunEnd(SpanProcessor):
    def __init__(self, ended: threading.Event) -> None:
        self.ended = ended

    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith("reactorflow.run"):
            self.ended.set()


def _attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


async def test_spans_per_execution_attempt_and_rollback_action(
        exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    spans, provider = exporter
    flow = rf.Reactor(unique("otel-saga"))
    tries: list[int] = []

    @flow.step(retries=rf.Retry(2, 0))
    async def reserve() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise OSError("flaky")
        return "r"

    @reserve.undo
    async def release(reserve: str) -> None:
        pass

    @flow.step
    async def charge(reserve: str) -> str:
        raise RuntimeError("card declined")

    async with Environment(middleware=[OpenTelemetryMiddleware(provider)]):
        run = await flow.run()
    assert run.status is rf.Status.FAILED

    finished = spans.get_finished_spans()
    by_name = {}
    for span in finished:
        by_name.setdefault(span.name, []).append(span)
    [root] = by_name[f"reactorflow.run {flow.name}"]
    assert _attrs(root)["reactorflow.run_id"] == run.id
    assert _attrs(root)["reactorflow.status"] == "failed"
    assert root.status.status_code is StatusCode.ERROR

    attempts = by_name["reactorflow.step reserve"]
    assert [_attrs(s)["reactorflow.attempt"] for s in attempts] == [1, 2]
    assert [_attrs(s)["reactorflow.status"] for s in attempts] == ["retrying", "completed"]
    assert attempts[0].status.status_code is StatusCode.ERROR
    [charged] = by_name["reactorflow.step charge"]
    assert charged.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in charged.events)
    [undo] = by_name["reactorflow.undo reserve"]
    for child in [*attempts, charged, undo]:
        assert child.parent is not None and child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
        assert {"reactorflow.run_id", "reactorflow.reactor", "reactorflow.step",
                "reactorflow.attempt"} <= set(_attrs(child))


async def test_a_held_runs_span_ends_as_an_error(
        exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    """A held run's execution ends with a step's failure that an operator must see: its span
    is an error, as a failed run's is."""
    spans, provider = exporter
    flow = rf.Reactor(unique("otel-held"), on_failure="hold")

    @flow.step
    async def charge() -> str:
        raise ConnectionError("the processor is down")

    async with Environment(middleware=[OpenTelemetryMiddleware(provider)]):
        run = await flow.run()
    assert run.status is rf.Status.HELD
    [root] = [s for s in spans.get_finished_spans() if s.name == f"reactorflow.run {flow.name}"]
    assert _attrs(root)["reactorflow.status"] == "held"
    assert root.status.status_code is StatusCode.ERROR
    assert "the processor is down" in (root.status.description or "")


async def test_a_dispatched_run_continues_its_trace_in_a_worker(
        exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    spans, provider = exporter
    flow = rf.Reactor(unique("otel-dispatch"))

    @flow.step
    async def one() -> int:
        return 1

    tracer = provider.get_tracer("test")
    async with Environment(middleware=[OpenTelemetryMiddleware(provider)]) as env:
        with tracer.start_as_current_span("request") as request:
            started = await flow.dispatch()
        await env.drain()
        assert (await flow.get(started.id)).ok
    [root] = [s for s in spans.get_finished_spans() if s.name.startswith("reactorflow.run")]
    assert root.context.trace_id == request.get_span_context().trace_id
    assert root.parent is not None and root.parent.span_id == request.get_span_context().span_id


async def test_the_trace_travels_in_dramatiq_messages(
        exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    spans, provider = exporter
    flow = rf.Reactor(unique("otel-dramatiq"))

    @flow.step
    async def one() -> int:
        return 1

    tracer = provider.get_tracer("test")
    run_ended = threading.Event()
    provider.add_span_processor(_OnRunEnd(run_ended))
    async with configured(rf.MemoryStorage()):
        rf.configure(middleware=[OpenTelemetryMiddleware(provider)])
        with tracer.start_as_current_span("request") as request:
            started = await flow.dispatch()
        run = await flow.wait(started.id, timeout=30)
        # the worker ends its span after the run's last save, which `wait` already saw
        assert await anyio.to_thread.run_sync(run_ended.wait, 30)
    assert run.ok
    [root] = [s for s in spans.get_finished_spans() if s.name.startswith("reactorflow.run")]
    assert root.context.trace_id == request.get_span_context().trace_id
    assert root.parent is not None and root.parent.span_id == request.get_span_context().span_id


async def test_spans_made_inside_concurrent_steps_nest_under_their_own_step(
        exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    spans, provider = exporter
    tracer = provider.get_tracer("user-code")
    flow = rf.Reactor(unique("otel-parallel"))

    async def call_service(name: str) -> str:
        with tracer.start_as_current_span(f"http {name}"):
            for _ in range(5):
                await anyio.sleep(0)  # the sibling step runs meanwhile
        return name

    @flow.step
    async def left() -> str:
        return await call_service("left")

    @flow.step
    async def right() -> str:
        return await call_service("right")

    async with Environment(middleware=[OpenTelemetryMiddleware(provider)]):
        assert (await flow.run()).ok
    finished = {s.name: s for s in spans.get_finished_spans()}
    for side in ("left", "right"):
        inner, step = finished[f"http {side}"], finished[f"reactorflow.step {side}"]
        assert inner.parent is not None and inner.parent.span_id == step.context.span_id


def test_without_the_extra_the_import_names_it() -> None:
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "try:\n    import reactorflow.otel\nexcept ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(rf.__file__).parent.parent)})
    assert "pip install 'reactorflow[otel]'" in done.stdout, done.stderr
