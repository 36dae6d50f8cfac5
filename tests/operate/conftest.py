"""Fixtures of the operating tests: a RedisStorage namespace of their own, which subprocesses
reach through REACTORFLOW_REDIS_URL and REACTORFLOW_REDIS_NAMESPACE (the suite deletes the
keys of its run namespace at the end)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import reactorflow as rf
from reactorflow import config
from tests.helpers import redis_namespace

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Shared:
    url: str
    namespace: str

    def env(self) -> dict[str, str]:
        """What a subprocess needs to see the same runs (and a broker of the namespace)."""
        return {"REACTORFLOW_REDIS_URL": self.url, "REACTORFLOW_REDIS_NAMESPACE": self.namespace,
                "REACTORFLOW_TEST_NAMESPACE": self.namespace}


@pytest.fixture
async def shared(redis_url: str) -> AsyncIterator[Shared]:
    """A namespace of this test's own, configured as this process's storage."""
    lane = Shared(redis_url, redis_namespace("ops"))
    storage = rf.RedisStorage.from_url(lane.url, namespace=lane.namespace)
    rf.configure(storage=storage)
    try:
        yield lane
    finally:
        config.reset()
        await storage.aclose()


@dataclass
class Result:
    code: int
    out: str
    err: str


def environment(lane: Shared | None) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("REACTORFLOW_")}
    environ["PYTHONPATH"] = str(ROOT)
    if lane is not None:
        environ.update(lane.env())
    return environ


def cli(lane: Shared | None, *args: str) -> Result:
    """`python -m reactorflow ARGS` in a subprocess that sees `lane`'s runs."""
    proc = subprocess.run([sys.executable, "-m", "reactorflow", *args], cwd=ROOT,
                          env=environment(lane), capture_output=True, text=True, timeout=60,
                          check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)
