"""The runtime's job queue (`reactorflow.runtime.engine.job_queue`) on Dramatiq.

The `reactorflow` package registers `current_queue` at import. Dramatiq itself is imported on
the first enqueue (not by `import reactorflow`).
"""

from __future__ import annotations

import os
from typing import assert_never

from reactorflow import config
from reactorflow.runtime.engine.job_queue import Job, JobKind


class DramatiqQueue:
    """Jobs as messages to reactorflow's Dramatiq actors on the current broker (see
    `reactorflow.workers.broker`: configured, from the environment, or the embedded one)."""

    @property
    def shared(self) -> bool:
        """A broker shared with other processes is configured (`rf.configure(broker=...)` or
        `REACTORFLOW_REDIS_URL`); else jobs go to the embedded in-process worker."""
        return config.settings().broker is not None or bool(os.environ.get(config.REDIS_URL_ENV))

    def enqueue(self, job: Job, *, delay: float | None = None) -> None:
        """Send `job` to its actor on the current broker, `delay` seconds from now.

        Args:
            job: what to do.
            delay: seconds to wait before a worker may take it (None: at once).
        """
        from reactorflow.workers import broker  # noqa: PLC0415 (Dramatiq on first use only)

        match job.kind:
            case JobKind.RUN:
                broker.enqueue_run(job.run_id, job.reactor, delay=delay, snoozes=job.snoozes,
                                   headers=job.headers, version=job.version,
                                   refused=job.refused)
            case JobKind.UNIT:
                broker.enqueue_unit(job.run_id, job.reactor, job.step, delay=delay,
                                    headers=job.headers, snoozes=job.snoozes,
                                    version=job.version, refused=job.refused)
            case JobKind.ELEMENT:
                broker.enqueue_element(job.run_id, job.reactor, job.step, job.index,
                                       delay=delay, headers=job.headers,
                                       version=job.version, refused=job.refused,
                                       count=job.count)
            case JobKind.UNDO:
                broker.enqueue_undo(job.run_id, job.reactor, job.step, job.index,
                                    delay=delay, headers=job.headers,
                                    version=job.version, refused=job.refused)
            case _:
                assert_never(job.kind)


    def timer_armed(self, due: float) -> None:
        """On the embedded broker, start its in-process worker (its firing loop fires the
        timer); in any process with a firing loop (a worker's), wake it for `due`."""
        from reactorflow.runtime.services.timers import FIRER  # noqa: PLC0415 (as above)
        from reactorflow.workers import broker  # noqa: PLC0415 (Dramatiq on first use only)

        if not self.shared:
            broker.ensure_embedded_worker(broker.current_broker())
        FIRER.poke(due)


_queue = DramatiqQueue()


def current_queue() -> DramatiqQueue:
    """The queue the runtime uses (registered by the `reactorflow` package)."""
    return _queue
