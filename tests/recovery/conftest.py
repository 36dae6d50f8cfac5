"""Fixtures of the durability tests: a Redis namespace shared with subprocesses, and helpers
to start those subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from tests.helpers import redis_namespace

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "tests.workflows.durable"


@pytest.fixture(autouse=True)
def _no_redis_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process picks its storage explicitly (and the sweeper re-drives in-process:
    with REACTORFLOW_REDIS_URL set it would enqueue for workers instead)."""
    monkeypatch.delenv(config.REDIS_URL_ENV, raising=False)


@dataclass
class Shared:
    url: str
    namespace: str
    storage: rf.Storage


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module with `CLUSTER_LANE = True` runs on the suite's Redis Cluster too (`-m cluster`):
    its `shared` namespace on both Redis kinds (its `storage`: see `tests.conftest.on_every`)."""
    if getattr(metafunc.module, "CLUSTER_LANE", False) and "shared" in metafunc.fixturenames:
        metafunc.parametrize("shared", ["redis", "cluster"], indirect=True)


@pytest.fixture
async def shared(request: pytest.FixtureRequest) -> AsyncIterator[Shared]:
    """A fresh Redis namespace, configured in this process as subprocesses configure it (on
    the suite's Redis, or its Redis Cluster in the cluster lane)."""
    kind = getattr(request, "param", "redis")
    url = request.getfixturevalue("redis_cluster_url" if kind == "cluster" else "redis_url")
    namespace = redis_namespace("rec")
    storage = rf.RedisStorage.from_url(url, namespace=namespace)
    rf.configure(storage=storage, lock_ttl=1.0, stall_timeout=0.5)
    try:
        yield Shared(url, namespace, storage)
    finally:
        config.reset()
        await storage.aclose()


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != config.REDIS_URL_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                     env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


class Child:
    """A subprocess running `python -m tests.workflows.durable ...`, output kept in files."""

    def __init__(self, tmp: Path, name: str, args: list[str], env: dict[str, str]) -> None:
        self.out_path = tmp / f"{name}.out"
        self.err_path = tmp / f"{name}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", SCRIPT, *args], cwd=REPO_ROOT,
                                         env=env, stdout=out, stderr=err)

    @property
    def stdout(self) -> str:
        return self.out_path.read_text()

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def describe(self) -> str:
        return (f"exit code {self.proc.poll()}\n--- stdout ---\n{self.stdout}\n"
                f"--- stderr ---\n{self.stderr}")

    async def finish(self, timeout: float = 10.0) -> str:
        """Wait for a clean exit; its stdout."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"subprocess did not finish in {timeout}s: {self.describe()}")
            await anyio.sleep(0.02)
        assert self.proc.returncode == 0, self.describe()
        return self.stdout

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Child]]:
    children: list[Child] = []

    def start(name: str, *args: str, env: dict[str, str] | None = None) -> Child:
        child = Child(tmp_path, name, list(args), env if env is not None else child_env())
        children.append(child)
        return child

    yield start
    for child in children:
        child.kill()


async def until(check: Callable[[], bool], what: str, *, timeout: float = 10.0,
                child: Child | None = None) -> None:
    """Poll `check` until true; fail naming `what` (and the child's output) on timeout."""
    deadline = time.monotonic() + timeout
    while not check():
        if child is not None and child.proc.poll() is not None:
            pytest.fail(f"subprocess exited before {what}: {child.describe()}")
        if time.monotonic() > deadline:
            detail = f": {child.describe()}" if child is not None else ""
            pytest.fail(f"timed out waiting for {what}{detail}")
        await anyio.sleep(0.02)
