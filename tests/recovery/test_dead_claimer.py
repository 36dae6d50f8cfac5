"""A process killed between claiming an idempotency key and storing its run: a later start
takes the claim over once the dead process's liveness lock has lapsed (issue 8, defect 8)."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

import reactorflow as rf
from tests.helpers import unique
from tests.recovery.conftest import REPO_ROOT, Shared, child_env


async def _claimed(proc: subprocess.Popen[str]) -> str:
    """The run id the subprocess claimed the key for (it prints it, then blocks)."""
    assert proc.stdout is not None
    line = await anyio.to_thread.run_sync(proc.stdout.readline)
    assert line.startswith("claimed "), (line, proc.poll())
    return line.split()[1]


@pytest.mark.slow
async def test_a_killed_claimer_leaves_no_fake_run(shared: Shared) -> None:
    flow = rf.Reactor(unique("idem-killed"))
    ran: list[str] = []

    @flow.step
    async def only(ctx: rf.StepContext) -> int:
        ran.append(ctx.run_id)
        return 1

    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.workflows.claimer", shared.url, shared.namespace,
         flow.name, "order-42"],
        cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True)
    try:
        with anyio.fail_after(30):
            dead = await _claimed(proc)
    finally:
        proc.kill()  # SIGKILL: between its claim and its store
        proc.wait(10)
    assert await shared.storage.lock_owner(dead) is not None  # it held its run's lock

    run = await flow.run(idempotency_key="order-42")  # waits for the 1 s lock to lapse
    assert run.id != dead and run.replayed is False
    assert run.status is rf.Status.COMPLETED and ran == [run.id]
    with pytest.raises(rf.RunNotFound):
        await flow.get(dead)

    again = await flow.run(idempotency_key="order-42")
    assert again.id == run.id and again.replayed is True
    assert ran == [run.id]
