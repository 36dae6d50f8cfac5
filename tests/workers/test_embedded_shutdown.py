"""Stopping the embedded worker while one of its jobs still enqueues (a snooze, a signal): the
job's enqueue must not start another embedded worker on the broker being stopped (that worker
would outlive the shutdown and leave the next broker without one)."""

from __future__ import annotations

import threading
from typing import Any

import dramatiq
from dramatiq.middleware import Middleware

from reactorflow.runtime.engine import job_queue as queue
from reactorflow.workers import broker


class _GoOnShutdown(Middleware):
    def __init__(self, go: threading.Event) -> None:
        self.go = go

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        self.go.set()  # the worker is stopping now: let the straggler enqueue


def test_a_job_enqueuing_while_the_embedded_worker_stops_starts_no_worker() -> None:
    embedded = broker.current_broker()
    assert broker.is_embedded(embedded)
    started, go, sent = threading.Event(), threading.Event(), threading.Event()
    embedded.add_middleware(_GoOnShutdown(go))

    def straggle() -> None:
        started.set()
        go.wait(10)
        queue.enqueue_run("no-such-run", "no.such.reactor", delay=60, version=1)
        sent.set()

    actor = dramatiq.Actor(straggle, broker=embedded, actor_name="tests.straggle",
                           queue_name=broker.QUEUE, priority=0, options={"max_retries": 0})
    broker.send(actor.message(), embedded, None)
    assert started.wait(10)
    broker.shutdown()
    assert sent.is_set()  # it enqueued while the worker stopped
    assert broker._runtime.worker is None  # and started no other worker
