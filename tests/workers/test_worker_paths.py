"""The worker's own paths, through real Dramatiq messages on the embedded StubBroker and its
in-process Worker: a job that cannot take its run's lock snoozes and comes back; a job that can
never succeed ends with PermanentFailure and is never retried; a job whose infrastructure keeps
failing is retried by Dramatiq and, once its retries run out, fails its run and publishes."""

from __future__ import annotations

import functools
import logging

import anyio
import pytest
from dramatiq.brokers.stub import StubBroker

import reactorflow as rf
from reactorflow import config
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.workers.broker import JOB_RETRIES, QUEUE, current_broker
from tests.helpers import redeploy, until_lock_lapses
from tests.recovery.test_corrupt import _hanging_flow, _stalled_run
from tests.workers.test_unknown_reactor import paused_flow
from tests.workflows import background as bg


def _embedded() -> StubBroker:
    broker = current_broker()
    assert isinstance(broker, StubBroker)
    return broker


async def _processed(broker: StubBroker) -> None:
    """Until every message of the queue (delayed ones too) was processed or dead-lettered."""
    await anyio.to_thread.run_sync(
        functools.partial(broker.join, QUEUE, timeout=60_000, fail_fast=False))


async def test_a_job_that_cannot_take_the_run_snoozes_and_comes_back(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="reactorflow.worker")
    entered, log = anyio.Event(), []
    flow = _hanging_flow(entered, log)
    run_id = await _stalled_run(storage, flow, entered)  # running, nobody executing it
    assert await storage.acquire_lock(run_id, "someone-else", 60.0)

    queue.enqueue_run(run_id, flow.name, version=1)
    with anyio.fail_after(30):  # the job waited for the lock, then re-enqueued itself
        while not any(f"reactorflow.resume.waiting run_id={run_id}" in r.getMessage()
                      and "snoozes=0" in r.getMessage() for r in caplog.records):
            await anyio.sleep(0.02)
    assert log == ["first", "hangs"]  # it did not touch the run
    assert await storage.release_lock(run_id, "someone-else") == 0

    done = await flow.wait(run_id, timeout=30)  # the snoozed job took it on
    assert done.status is rf.Status.COMPLETED
    assert log == ["first", "hangs", "hangs"]


async def test_a_job_for_an_unknown_reactor_fails_its_run_once_and_is_not_retried(
        storage: rf.Storage) -> None:
    flow = paused_flow()  # its run's stored reactor is not declared in this worker
    paused = await flow.run()
    redeploy(flow)
    broker = _embedded()
    queue.enqueue_run(paused.id, flow.name, version=1)
    await _processed(broker)

    (dead,) = broker.dead_letters  # PermanentFailure: dead-lettered on its first delivery
    assert dead.args[0] == paused.id and not dead.options.get("retries")
    failed = await flow.get(paused.id)
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.type == "UnknownReactor"
    assert flow.name in failed.error.message


class UnreachableLocks(rf.MemoryStorage):
    """MemoryStorage whose lock on one run cannot be taken the next `failures` times: the
    storage error a job gets while its server is unreachable."""

    def __init__(self, run_id: str, failures: int) -> None:
        super().__init__()
        self.run_id, self.failures, self.refused = run_id, failures, 0

    async def acquire_lock(self, lock_id: str, owner: str, ttl: float) -> bool:
        if lock_id == self.run_id and self.refused < self.failures:
            self.refused += 1
            raise rf.StorageConnectionError("memory://", "unreachable (test)")
        return await super().acquire_lock(lock_id, owner, ttl)


async def test_a_job_whose_retries_run_out_fails_its_run_and_publishes() -> None:
    storage = UnreachableLocks("", 0)
    rf.configure(storage=storage)
    try:
        paused = await bg.late.run()
        await until_lock_lapses(storage, paused.id)
        storage.run_id, storage.failures = paused.id, 1 + JOB_RETRIES  # every delivery fails
        async with storage.subscribe(paused.id) as subscription:
            queue.enqueue_run(paused.id, bg.late.name, version=1)
            with anyio.fail_after(60):  # Dramatiq's backoff: about 0.5 + 1 + 2 s
                assert await subscription.wait(60)  # completion published: waiters wake
        await _processed(_embedded())
        assert storage.refused == 1 + JOB_RETRIES  # the first delivery and each retry
        failed = await bg.late.get(paused.id)
        assert failed.status is rf.Status.FAILED
        assert failed.error is not None and failed.error.type == "JobRetriesExhausted"
        assert f"{JOB_RETRIES} time(s)" in failed.error.message
        assert "unreachable (test)" in failed.error.message
    finally:
        config.reset()


def test_a_cluster_url_in_the_environment_asks_for_a_broker_in_code(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Dramatiq's RedisBroker cannot use a Redis Cluster: say what to configure instead."""
    from reactorflow.errors import ConfigurationError
    from reactorflow.workers import broker

    monkeypatch.setattr(broker._runtime, "env_broker", None)
    monkeypatch.setenv(config.REDIS_URL_ENV, "redis+cluster://127.0.0.1:7000")
    with pytest.raises(ConfigurationError, match=r"Redis Cluster.*rf\.configure\(broker="):
        current_broker()
