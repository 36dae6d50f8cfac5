"""Two processes settle the same deadline at once (issue 25 item 3): exactly one resumes the
interrupt, the other finds it claimed (api.md §12: exactly once however many fire at once)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import reactorflow as rf
from reactorflow import config
from tests.helpers import kinds, redis_namespace, until_past
from tests.workflows.deadlines import reminder

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]

FIRER = """
import sys
import anyio
import reactorflow as rf
from reactorflow.runtime.ops.deadlines import deadline_due
from tests.workflows.deadlines import reminder

async def main(url: str, namespace: str, run_id: str) -> None:
    storage = rf.RedisStorage.from_url(url, namespace=namespace)
    rf.configure(storage=storage)
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    settled = await deadline_due(reminder, storage, run_id)
    print("won" if settled is not None else "lost", flush=True)
    await storage.aclose()

anyio.run(main, *sys.argv[1:4])
"""


async def test_two_processes_settling_one_deadline_resume_it_once(redis_url: str) -> None:
    namespace = redis_namespace("deadline")
    storage = rf.RedisStorage.from_url(redis_url, namespace=namespace)
    rf.configure(storage=storage)
    try:
        paused = await reminder.run(order_id="P1")
        assert paused.status is rf.Status.PAUSED
        await storage.disarm_timer(paused.id)  # only the two processes notice the deadline
        await until_past(paused.timeout_at)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("REACTORFLOW_")}
        environ["PYTHONPATH"] = str(ROOT)
        firers = [subprocess.Popen([sys.executable, "-c", FIRER, redis_url, namespace, paused.id],
                                   cwd=ROOT, env=environ, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True) for _ in range(2)]
        for firer in firers:
            assert firer.stdout is not None and firer.stdout.readline() == "ready\n"
        for firer in firers:
            assert firer.stdin is not None
            firer.stdin.write("go\n")
            firer.stdin.flush()
        said = sorted(firer.communicate(timeout=60)[0].strip() for firer in firers)
        assert [firer.returncode for firer in firers] == [0, 0]
        assert said == ["lost", "won"]
        run = await reminder.get(paused.id)
        assert run.status is rf.Status.COMPLETED, run.error
        assert run.value == "prep-P1 by timer:P1"
        assert kinds(run).count("interrupt.resumed:approve") == 1
    finally:
        config.reset()
        await storage.aclose()
