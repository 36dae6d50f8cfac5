"""Jobs waiting in the Dramatiq queues of this process's broker (what the
`reactorflow.queue.waiting` gauge reports; see docs/tracing.md#metrics).

"Waiting" is the number of jobs ready to be taken that no worker has taken yet: a Redis
broker's queue list, a `StubBroker`'s (the embedded worker's) queue. Delayed jobs (a snooze, a
timer's backoff) are not counted until they are due, nor the jobs a worker has prefetched. A
broker that cannot tell this cheaply (RabbitMQ, or any other) reports no queue at all.
"""

from __future__ import annotations

import logging

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.brokers.stub import StubBroker
from dramatiq.common import dq_name, xq_name

from reactorflow.workers.broker import QUEUE, broker_in_use

log = logging.getLogger("reactorflow.worker")


def waiting_jobs(broker: dramatiq.Broker | None = None) -> dict[str, int]:
    """Jobs waiting per queue on `broker` (default: the broker this process uses, if any:
    none is made for this). A queue whose count cannot be read is left out (and logged).

    Args:
        broker: The broker to look at (None: this process's, `broker_in_use`).
    """
    broker = broker if broker is not None else broker_in_use()
    if broker is None:
        return {}
    counted: dict[str, int] = {}
    for queue in _queues(broker):
        try:
            count = _count(broker, queue)
        except Exception:  # a broker that is down: no value this time
            log.warning("reactorflow.queue.count_failed queue=%s", queue, exc_info=True)
            continue
        if count is not None:
            counted[queue] = count
    return counted


def _queues(broker: dramatiq.Broker) -> list[str]:
    declared = {str(name) for name in broker.get_declared_queues()}
    named = {QUEUE} | {name for name in declared
                       if name not in (dq_name(name), xq_name(name))}
    return sorted(named)


def _count(broker: dramatiq.Broker, queue: str) -> int | None:
    if isinstance(broker, StubBroker):
        found = broker.queues.get(queue)
        return 0 if found is None else int(found.qsize())
    if isinstance(broker, RedisBroker):
        return int(broker.client.llen(f"{broker.namespace}:{queue}"))
    return None
