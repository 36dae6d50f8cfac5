"""OpenTelemetry metrics for reactorflow: what `OpenTelemetryMiddleware(metrics=True)` records
(`pip install 'reactorflow[otel]'`, with a meter provider you configured: the global one, or
`meter_provider=`). See docs/tracing.md#metrics.

| instrument | kind | attributes |
| --- | --- | --- |
| `reactorflow.runs.started` | counter | `reactor` |
| `reactorflow.runs.ended` | counter | `reactor`, `status` (a terminal status) |
| `reactorflow.step.duration` | histogram, s | `reactor`, `step`, `status` |
| `reactorflow.step.retries` | counter | `reactor`, `step` |
| `reactorflow.gate.wait` | histogram, s | `reactor`, `gate` |
| `reactorflow.timer.lateness` | histogram, s | `reactor` |
| `reactorflow.queue.waiting` | observable gauge | `queue` |

Each is recorded in the process where it happens (a run's executions, its steps and gates in
the process running them; a timer's lateness in the process firing it); the queue gauge is
read from this process's Dramatiq broker when the reader collects (`workers.backlog`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

try:
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError("reactorflow.otel_metrics needs OpenTelemetry: pip install "
                      "'reactorflow[otel]'") from exc

from reactorflow import clock
from reactorflow.middleware import GateEvent, RunEvent, StepEvent, TimerEvent
from reactorflow.status import TERMINAL
from reactorflow.workers.backlog import waiting_jobs


class RunMetrics:
    """The instruments, and the step attempts under way (their start times)."""

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        """Args:
            meter_provider: where measurements go (default: the global provider).
        """
        meter = metrics.get_meter("reactorflow", meter_provider=meter_provider)
        self.started = meter.create_counter(
            "reactorflow.runs.started", unit="{run}", description="Runs started")
        self.ended = meter.create_counter(
            "reactorflow.runs.ended", unit="{run}",
            description="Runs that reached a terminal status")
        self.step_duration = meter.create_histogram(
            "reactorflow.step.duration", unit="s", description="Duration of a step attempt")
        self.retries = meter.create_counter(
            "reactorflow.step.retries", unit="{retry}",
            description="Failed step attempts that will be retried")
        self.gate_wait = meter.create_histogram(
            "reactorflow.gate.wait", unit="s",
            description="How long a run or step waited to acquire a gate")
        self.timer_lateness = meter.create_histogram(
            "reactorflow.timer.lateness", unit="s",
            description="Seconds from a timer's due time to its firing")
        meter.create_observable_gauge(
            "reactorflow.queue.waiting", callbacks=[_observe_queues], unit="{job}",
            description="Jobs waiting in a Dramatiq queue, not yet taken by a worker")
        self._mutex = threading.Lock()
        self._began: dict[tuple[str, str], float] = {}  # (run id, step) -> perf_counter

    def run_began(self, event: RunEvent) -> None:
        if event.first:
            self.started.add(1, {"reactor": event.reactor})

    def run_settled(self, event: RunEvent) -> None:
        with self._mutex:  # attempts cut off (a halt, an abort) are not measured
            for key in [k for k in self._began if k[0] == event.run_id]:
                del self._began[key]
        status = str(event.status)
        if status in TERMINAL:
            self.ended.add(1, {"reactor": event.reactor, "status": status})

    def step_began(self, event: StepEvent) -> None:
        with self._mutex:
            self._began[event.run_id, event.step] = clock.monotonic()

    def step_ended(self, event: StepEvent, status: str) -> None:
        with self._mutex:
            began = self._began.pop((event.run_id, event.step), None)
        if began is not None:
            self.step_duration.record(clock.monotonic() - began, {
                "reactor": event.reactor, "step": event.step, "status": status})

    def retried(self, event: StepEvent) -> None:
        self.step_ended(event, "retrying")
        self.retries.add(1, {"reactor": event.reactor, "step": event.step})

    def gate(self, event: GateEvent) -> None:
        if event.action == "acquired":
            self.gate_wait.record(event.waited, {"reactor": event.reactor, "gate": event.gate})

    def timer(self, event: TimerEvent) -> None:
        self.timer_lateness.record(event.lateness, {"reactor": event.reactor})


def _observe_queues(options: CallbackOptions) -> Iterable[Observation]:
    return [Observation(count, {"queue": queue}) for queue, count in waiting_jobs().items()]
