"""OpenTelemetry tracing for reactorflow (`pip install 'reactorflow[otel]'`).

`OpenTelemetryMiddleware` makes, with the tracer provider you configured:

* a span per execution of a run (`reactorflow.run <reactor>`), a child of the span current when
  the execution started, or of the trace context its worker job carried;
* a child span per step attempt (`reactorflow.step <step>`; a retried step has one per
  attempt) and per rollback action (`reactorflow.undo <step>`, `reactorflow.compensate
  <step>`), current while the step's code runs, so spans your code makes nest under it;
* attributes `reactorflow.run_id`, `reactorflow.reactor`, `reactorflow.step`,
  `reactorflow.attempt`, `reactorflow.status` (ids, names and statuses only: never inputs or
  results), and errors recorded on the span with an ERROR status.

Worker jobs (a dispatch, a hand-off, an async step, a map element) carry the W3C trace context
of the code that enqueued them (else of the run's last execution span, for a hand-off made after
it ended): the worker's execution continues the same trace.

With `metrics=True` it also records OpenTelemetry metrics (runs started and ended, step
durations, retries, gate waits, timer lateness, jobs waiting per queue: see
`reactorflow.otel_metrics`), through the global meter provider or `meter_provider=`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, SpanContext, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError("reactorflow.otel needs OpenTelemetry: pip install 'reactorflow[otel]'"
                      ) from exc

from reactorflow.errors import ReactorflowError
from reactorflow.middleware import GateEvent, Middleware, RunEvent, StepEvent, TimerEvent
from reactorflow.otel_metrics import RunMetrics

log = logging.getLogger("reactorflow.otel")

REMEMBERED_RUNS = 10_000  # last execution span per run, for hand-offs enqueued after it ended
FAILED = frozenset({"failed", "aborted", "halted", "cancelled", "held"})
"""The statuses a run's span ends in as an error (held: a step failed, and an operator must act)."""


@dataclass(slots=True)
class _Open:
    span: Span
    token: object


class OpenTelemetryMiddleware(Middleware):
    """Spans for runs, step attempts and rollback actions, and with `metrics=True` metrics
    (see the module)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None, *,
                 metrics: bool = False, meter_provider: MeterProvider | None = None) -> None:
        """Args:
            tracer_provider: where spans go (default: the global provider).
            metrics: also record metrics (`reactorflow.otel_metrics`); off by default.
            meter_provider: where metrics go (default: the global provider); an
                `opentelemetry.metrics.MeterProvider` (an SDK one with your readers).

        Raises:
            ReactorflowError: `meter_provider` given without `metrics=True`.
        """
        if meter_provider is not None and not metrics:
            raise ReactorflowError("OpenTelemetryMiddleware(meter_provider=...) records "
                                   "nothing without metrics=True: pass metrics=True too")
        self._tracer = trace.get_tracer("reactorflow", tracer_provider=tracer_provider)
        self._metrics = RunMetrics(meter_provider) if metrics else None
        self._runs: dict[str, _Open] = {}
        self._steps: dict[tuple[str, str, str], _Open] = {}
        self._last: OrderedDict[str, SpanContext] = OrderedDict()

    # -- runs ----------------------------------------------------------------------------------

    def before_run(self, event: RunEvent) -> None:
        if self._metrics is not None:
            self._metrics.run_began(event)
        span = self._tracer.start_span(f"reactorflow.run {event.reactor}", attributes={
            "reactorflow.run_id": event.run_id, "reactorflow.reactor": event.reactor})
        self._runs[event.run_id] = _Open(span, _attach(span))
        self._last[event.run_id] = span.get_span_context()
        self._last.move_to_end(event.run_id)
        while len(self._last) > REMEMBERED_RUNS:
            self._last.popitem(last=False)

    def after_run(self, event: RunEvent) -> None:
        if self._metrics is not None:
            self._metrics.run_settled(event)
        for key in [k for k in self._steps if k[0] == event.run_id]:  # cut off (halt, abort)
            self._end(self._steps.pop(key), None, "")
        opened = self._runs.pop(event.run_id, None)
        if opened is None:
            return
        status = str(event.status)
        opened.span.set_attribute("reactorflow.status", status)
        if status in FAILED:
            opened.span.set_status(Status(StatusCode.ERROR, _describe(event.error) or status))
        self._end(opened, None, status)

    # -- steps and rollback actions ------------------------------------------------------------

    def before_step(self, event: StepEvent) -> None:
        if self._metrics is not None:
            self._metrics.step_began(event)
        self._open("step", event)

    def after_step(self, event: StepEvent) -> None:
        if self._metrics is not None:
            self._metrics.step_ended(event, str(event.status))
        self._close("step", event)

    def before_retry(self, event: StepEvent) -> None:
        if self._metrics is not None:
            self._metrics.retried(event)
        self._close("step", event, status="retrying")

    def on_gate(self, event: GateEvent) -> None:
        if self._metrics is not None:
            self._metrics.gate(event)

    def on_timer(self, event: TimerEvent) -> None:
        if self._metrics is not None:
            self._metrics.timer(event)

    def before_undo(self, event: StepEvent) -> None:
        self._open("undo", event)

    def after_undo(self, event: StepEvent) -> None:
        self._close("undo", event)

    def before_compensate(self, event: StepEvent) -> None:
        self._open("compensate", event)

    def after_compensate(self, event: StepEvent) -> None:
        self._close("compensate", event)

    # -- worker jobs ---------------------------------------------------------------------------

    def inject(self, run_id: str, headers: dict[str, str]) -> None:
        context = otel_context.get_current()
        if not trace.get_current_span(context).get_span_context().is_valid:
            remembered = self._last.get(run_id)
            if remembered is not None:
                context = trace.set_span_in_context(trace.NonRecordingSpan(remembered))
        propagate.inject(headers, context=context)

    @contextmanager
    def job_context(self, headers: Mapping[str, str]) -> Iterator[None]:
        token = otel_context.attach(propagate.extract(dict(headers)))
        try:
            yield
        finally:
            otel_context.detach(token)

    # -- inside --------------------------------------------------------------------------------

    def _open(self, kind: str, event: StepEvent) -> None:
        key = (event.run_id, kind, event.step)
        stale = self._steps.pop(key, None)
        if stale is not None:  # the previous attempt ended without an after hook (a halt)
            self._end(stale, None, "")
        run = self._runs.get(event.run_id)
        parent = trace.set_span_in_context(run.span) if run is not None else None
        span = self._tracer.start_span(f"reactorflow.{kind} {event.step}", context=parent,
                                       attributes={"reactorflow.run_id": event.run_id,
                                                   "reactorflow.reactor": event.reactor,
                                                   "reactorflow.step": event.step,
                                                   "reactorflow.attempt": event.attempt})
        self._steps[key] = _Open(span, _attach(span))

    def _close(self, kind: str, event: StepEvent, status: str = "") -> None:
        opened = self._steps.pop((event.run_id, kind, event.step), None)
        if opened is not None:
            self._end(opened, event.error, status or str(event.status))

    def _end(self, opened: _Open, error: BaseException | None, status: str) -> None:
        span = opened.span
        if status:
            span.set_attribute("reactorflow.status", status)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()
        try:
            otel_context.detach(opened.token)  # type: ignore[arg-type]
        except Exception:  # ended in another context (a cut-off step): nothing to restore
            log.debug("reactorflow.otel.detach_skipped", exc_info=True)


def _attach(span: Span) -> object:
    return otel_context.attach(trace.set_span_in_context(span))


def _describe(error: Any) -> str:
    if error is None:
        return ""
    return str(getattr(error, "message", None) or error)
