"""Test support: a recording middleware and small utilities."""

from __future__ import annotations

import shutil
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.runtime.engine.job_queue import Job

RUN_NAMESPACE = f"rftest{uuid.uuid4().hex[:8]}"
"""Every Redis key (and Dramatiq queue) this test run writes starts with this; the suite deletes
exactly these keys at the end and never flushes a database."""


def redis_namespace(tag: str = "t") -> str:
    """A RedisStorage namespace of one test's own, inside this run's `RUN_NAMESPACE`."""
    return f"{RUN_NAMESPACE}-{tag}{uuid.uuid4().hex[:10]}"


def needs_service(executable: str, package: str) -> pytest.MarkDecorator:
    """Skip a lane whose service no Python package can ship, saying what to install."""
    return pytest.mark.skipif(
        shutil.which(executable) is None,
        reason=f"{executable} is not on PATH: install it (apt-get install {package})")


async def completed_elsewhere(flow: rf.Reactor, run_id: str, step: str) -> None:
    """From inside a run: until the sibling `step`'s completion is stored (to make steps
    complete in an order other than their declaration order)."""
    with anyio.fail_after(20):
        while (await flow.get(run_id)).steps[step].status != "completed":
            await anyio.sleep(0.01)


async def until_past(moment: float | None) -> None:
    """Until the wall clock is past `moment` (a stored deadline or timestamp, `time.time()`)."""
    assert moment is not None
    with anyio.fail_after(max(0.0, moment - time.time()) + 30):
        while time.time() <= moment:
            await anyio.sleep(0.01)


async def until_lock_lapses(storage: rf.Storage, lock: str) -> None:
    """Until nobody holds `lock` (its TTL ran out)."""
    with anyio.fail_after(30):
        while await storage.lock_owner(lock) is not None:
            await anyio.sleep(0.02)


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then closed again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_on(storage: rf.Storage, check: Callable[..., Awaitable[None]], *args: Any) -> None:
    """`anyio.run(check, *args)` with `storage` configured, closed and unconfigured after (for
    synchronous tests such as Hypothesis properties)."""
    from reactorflow import config

    rf.configure(storage=storage)

    async def main() -> None:
        try:
            await check(*args)
        finally:
            await storage.aclose()

    try:
        anyio.run(main)
    finally:
        config.reset()


def redeploy(old: rf.Reactor) -> None:
    """Forget `old` as a freshly started process would not know it, so the next version of
    the reactor can be declared under the same name (explicit: never left to the garbage
    collector)."""
    from reactorflow.definition import naming

    naming.forget(old)


def unique(name: str) -> str:
    """A reactor name no other test uses (reactor names are unique per process)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


class Recorder(rf.Middleware):
    """Records every hook as "hook:step" (or "hook" for run hooks), in order."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def _step(self, hook: str, event: rf.StepEvent) -> None:
        self.events.append(f"{hook}:{event.step}")

    def before_run(self, event: rf.RunEvent) -> None:
        self.events.append("before_run")

    def after_run(self, event: rf.RunEvent) -> None:
        self.events.append(f"after_run:{event.status}")

    def before_step(self, event: rf.StepEvent) -> None:
        self._step("before_step", event)

    def after_step(self, event: rf.StepEvent) -> None:
        self._step(f"after_step[{event.status}]", event)

    def before_compensate(self, event: rf.StepEvent) -> None:
        self._step("before_compensate", event)

    def after_compensate(self, event: rf.StepEvent) -> None:
        self._step(f"after_compensate[{event.status}]", event)

    def before_undo(self, event: rf.StepEvent) -> None:
        self._step("before_undo", event)

    def after_undo(self, event: rf.StepEvent) -> None:
        self._step(f"after_undo[{event.status}]", event)

    def before_retry(self, event: rf.StepEvent) -> None:
        self._step("before_retry", event)

    def after_retry(self, event: rf.StepEvent) -> None:
        self._step("after_retry", event)

    def only(self, *prefixes: str) -> list[str]:
        return [e for e in self.events if e.startswith(prefixes)]


def kinds(run: rf.Run, *prefixes: str) -> list[str]:
    """The run's history as "kind:step" strings, optionally filtered by kind prefix."""
    out = [f"{e.kind}:{e.step}" if e.step else e.kind for e in run.history]
    return [e for e in out if e.startswith(prefixes)] if prefixes else out


@asynccontextmanager
async def configured(backend: rf.Storage) -> AsyncIterator[rf.Storage]:
    """`backend` as the configured storage for the block; reset and closed afterwards."""
    from reactorflow import config

    rf.configure(storage=backend)
    try:
        yield backend
    finally:
        config.reset()
        await backend.aclose()


class Captured:
    """A queue that keeps the jobs it is given (to hand them to the queue under test)."""

    shared = False

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def enqueue(self, job: Job, *, delay: float | None = None) -> None:
        self.jobs.append(job)


async def unfired(run: rf.Run) -> None:
    """Void the run's timer (its interrupt deadline's): only a sweep then notices the deadline,
    as when no firer ran (the timers' own firing is tested in tests/timers)."""
    await config.current_storage().disarm_timer(run.id)
