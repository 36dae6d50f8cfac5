"""Fixtures of the operating tests: a Redis database of their own, in the default namespace
(so subprocesses given only REACTORFLOW_REDIS_URL see the same runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.asyncio as aioredis

import reactorflow as rf
from reactorflow import config

ROOT = Path(__file__).resolve().parents[2]
DB = 11


@pytest.fixture
async def shared_url(redis_url: str) -> AsyncIterator[str]:
    """An emptied Redis database, configured as this process's storage."""
    url = redis_url.rsplit("/", 1)[0] + f"/{DB}"
    client = aioredis.Redis.from_url(url)
    await client.flushdb()
    await client.aclose()
    storage = rf.RedisStorage.from_url(url)
    rf.configure(storage=storage)
    try:
        yield url
    finally:
        config.reset()
        await storage.aclose()


@dataclass
class Result:
    code: int
    out: str
    err: str


def cli(url: str | None, *args: str, env: dict[str, str] | None = None) -> Result:
    """`python -m reactorflow ARGS` in a subprocess, with the storage at `url`."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("REACTORFLOW_")}
    environ.update(PYTHONPATH=str(ROOT), **(env or {}))
    if url is not None:
        environ["REACTORFLOW_REDIS_URL"] = url
    proc = subprocess.run([sys.executable, "-m", "reactorflow", *args], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=60, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)
