"""Worker heartbeats: who is working (api.md §16).

Every worker process (each process of `reactorflow worker`, and the embedded worker of a
process) publishes a heartbeat every `rf.configure(heartbeat_interval=)` seconds (5 by
default): its process id, host, the queues it consumes, the versions of each reactor its loaded
modules declare, the jobs its actors are running, when it started and when it beat
(`rf.WorkerInfo`, stored with `Storage.beat`). A heartbeat lives 3 intervals: a worker that
died (SIGKILL, a lost host) is gone from `rf.list_workers()` 3 intervals after its last beat; a
worker that stops cleanly removes its own at once.

`Heartbeat` is the publishing loop of a process, on an event loop of its own in a daemon thread
(like the timer firing loop), started and stopped with the process's Dramatiq worker by the
`workers.broker.Heartbeats` middleware, which also counts the jobs in flight. An outage of the
storage makes a beat fail and the loop go on (one warning per beat that failed): the worker may
drop out of the list meanwhile, and is back with its next beat.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec

from reactorflow import clock, config
from reactorflow.definition import registry
from reactorflow.records import WorkerInfo, decode_worker, encode_worker
from reactorflow.runtime.services.loop_thread import LoopThread

log = logging.getLogger("reactorflow.workers")

LIVES = 3
"""A heartbeat is gone this many intervals after it was sent."""
JOB_QUEUE = "reactorflow"
"""The queue every reactorflow job goes to (the Dramatiq actors' `queue_name`): the queue
whose live workers `rf.explain` counts for a queued run."""


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def declared_versions() -> dict[str, tuple[int, ...]]:
    """Per reactor name, the versions declared in this process (oldest first)."""
    return {name: tuple(sorted(registry.versions(name))) for name in sorted(registry.names())}


class Heartbeat(LoopThread):
    """A process's heartbeat loop (see the module): `start` with the queues its worker
    consumes, `job_started`/`job_finished` around each job, `stop` when the worker stops."""

    def __init__(self) -> None:
        super().__init__("reactorflow-heartbeat")
        self._queues: tuple[str, ...] = ()
        self._in_flight: set[str] = set()
        self._started_at = 0.0
        self.worker_id = ""

    def start(self, queues: Iterable[str]) -> None:
        """Start beating, in a daemon thread (once; a started one goes on). The first beat is
        sent at once, on that thread: a worker's start never waits for its storage.

        Args:
            queues: The names of the queues this process's worker consumes.
        """
        def prepare() -> None:
            self._queues = tuple(sorted(set(queues)))
            self._started_at = clock.now()
            self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"

        self._start(prepare)

    def job_started(self, message_id: str) -> None:
        """A job (Dramatiq message `message_id`) started in this process (any thread)."""
        with self._mutex:
            self._in_flight.add(message_id)

    def job_finished(self, message_id: str) -> None:
        """The job ended (done, failed or skipped; idempotent)."""
        with self._mutex:
            self._in_flight.discard(message_id)

    def record(self, now: float) -> WorkerInfo:
        """This process's heartbeat as of `now`."""
        with self._mutex:
            in_flight = len(self._in_flight)
        return WorkerInfo(process=os.getpid(), host=socket.gethostname(), queues=self._queues,
                          versions=declared_versions(), jobs_in_flight=in_flight,
                          started_at=_utc(self._started_at), last_seen=_utc(now))

    async def beat(self) -> float:
        """Publish one heartbeat now; returns the interval until the next one.

        Raises:
            StorageError: The storage failed.
        """
        interval = config.settings().heartbeat_interval
        now = clock.now()
        await config.current_storage().beat(self.worker_id, encode_worker(self.record(now)),
                                            now, now + LIVES * interval)
        return interval

    async def _run(self) -> None:
        while not self.stopping:
            try:
                wait = await self.beat()
            except Exception:
                wait = config.settings().heartbeat_interval
                log.warning("reactorflow.workers.heartbeat_failed (trying again in %.1fs)",
                            wait, exc_info=True)
            await self.nap(wait)
        try:
            await config.current_storage().drop_worker(self.worker_id)
        except Exception:  # it expires by itself
            log.warning("reactorflow.workers.heartbeat_not_dropped", exc_info=True)


HEARTBEAT = Heartbeat()
"""This process's heartbeat loop."""


async def list_workers() -> list[WorkerInfo]:
    """The live worker processes: each one whose heartbeat is younger than 3 heartbeat
    intervals (`rf.configure(heartbeat_interval=)`), by host then process id.

    A heartbeat record this version cannot read (written by another release) is left out,
    with a warning in the log.

    Returns:
        One `rf.WorkerInfo` per live worker process.

    Raises:
        StorageError: The storage failed (`StorageConnectionError`: it cannot be reached).
    """
    found: list[WorkerInfo] = []
    for raw in await config.current_storage().workers(clock.now()):
        try:
            found.append(decode_worker(raw))
        except msgspec.DecodeError:
            log.warning("reactorflow.workers.unreadable_heartbeat bytes=%d", len(raw))
    return sorted(found, key=lambda info: (info.host, info.process))


async def serving(queue: str) -> int:
    """How many live worker processes consume `queue` (by their heartbeats).

    Args:
        queue: A Dramatiq queue name (reactorflow's jobs: `JOB_QUEUE`).

    Raises:
        StorageError: The storage failed.
    """
    return sum(queue in info.queues for info in await list_workers())
