"""A worker asked to run a reactor it does not declare says which modules it was started with
and what to start it with instead (for a run and for an async unit alike). The run's record is
the truth: only a run whose stored reactor is not declared is failed (a job naming the wrong
reactor is dropped: tests/workers/test_forged_jobs.py)."""

from __future__ import annotations

import pytest

import reactorflow as rf
from reactorflow import config, records
from reactorflow.workers import jobs
from tests.helpers import redeploy, unique

pytestmark = pytest.mark.usefixtures("storage")


def paused_flow(name: str = "known") -> rf.Reactor:
    flow = rf.Reactor(unique(name))

    @flow.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    return flow


async def test_a_run_of_an_unknown_reactor_names_the_worker_modules(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.WORKER_MODULES_ENV, "billing.flows,shipping.flows")
    flow = paused_flow()
    paused = await flow.run()
    redeploy(flow)  # a worker that does not declare the run's reactor, but one named like it
    near = paused_flow(flow.name)
    with pytest.raises(jobs.PermanentFailure) as info:
        await jobs.execute_run(paused.id, flow.name)
    message = str(info.value)
    assert f"reactor {flow.name!r} is not declared in this worker" in message
    assert "started with billing.flows, shipping.flows" in message
    assert "reactorflow worker billing.flows shipping.flows <module>" in message
    assert f"did you mean {near.name!r}?" in message
    assert "my_app" not in message
    failed = await flow.get(paused.id)
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.type == "UnknownReactor"
    assert failed.error.message == message


async def test_an_embedded_worker_says_to_import_the_module(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.WORKER_MODULES_ENV, raising=False)
    flow = paused_flow("zq-unlisted-qz")
    paused = await flow.run()
    redeploy(flow)
    with pytest.raises(jobs.PermanentFailure) as info:
        await jobs.execute_run(paused.id, flow.name)
    message = str(info.value)
    assert "not declared in this worker, the embedded worker of this process" in message
    assert "import the module that declares it" in message
    assert len(message) < 800  # at most a few of the process's reactors are listed
    assert "my_app" not in message and "did you mean" not in message


async def test_an_async_unit_of_an_unknown_reactor_gets_the_hint_too(
        storage: rf.Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.WORKER_MODULES_ENV, "billing.flows")
    flow = paused_flow()
    paused = await flow.run()
    redeploy(flow)
    with pytest.raises(jobs.PermanentFailure) as info:
        await jobs.execute_unit(paused.id, flow.name, "approve")
    assert "started with billing.flows" in str(info.value)
    raw = await storage.load_step(paused.id, "approve")
    assert raw is not None
    record = records.decode_step(raw)
    assert record.error is not None and record.error.type == "UnknownReactor"
    assert "reactorflow worker billing.flows <module>" in record.error.message
