"""Crash to resume: a `reactorflow worker` process SIGKILLed while its run's step blocks, and
the time until another worker goes on with the run — the interrupted step starting again there,
and the step after it starting — against the run lock's TTL (`lock_ttl`), the window a crashed
holder's lock may outlive it. Measured with the defaults and with `lock_ttl=3`, two workers of
1 process x 8 threads each, nothing else running (no `reactorflow sweep`). The time from the
kill until the lock was gone (polled from here every 10 ms) splits the figure into the lock's
lapse and what follows it (noticing the lapse, the job's pick-up, the lock, the load)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._report import Spread

TITLE = "crash to resume: a worker SIGKILLed mid-step, until another worker goes on"
NEEDS_REDIS = True
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TTL = rf.Settings().lock_ttl
SHORT_TTL = 3.0
SHORT_BOUND = 5.0  # seconds, the target with lock_ttl=3


def _start_worker(url: str, namespace: str, ttl: float | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REACTORFLOW_REDIS_URL=url, RF_BENCH_NAMESPACE=namespace,
               PYTHONPATH=str(ROOT))
    env.pop("RF_BENCH_LOCK_TTL", None)
    if ttl is not None:
        env["RF_BENCH_LOCK_TTL"] = repr(ttl)
    return subprocess.Popen(
        [sys.executable, "-m", "reactorflow", "worker", "benchmarks._crash_flows",
         "--processes", "1", "--threads", "8"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.terminate()  # the Dramatiq master stops its worker process
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(15)


async def _live(excluded: set[int], count: int, patience: float = 60.0) -> None:
    """Until `count` worker processes not in `excluded` send heartbeats."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        if len([w for w in await rf.list_workers() if w.process not in excluded]) >= count:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{count} workers did not come up within {patience:.0f} s")


async def run(ctx: Context) -> None:
    server = ctx.redis()
    report = ctx.report
    samples = ctx.pick(full=3, quick=1)
    report.note(f"{samples} kill(s) per setting (defaults, then lock_ttl={SHORT_TTL:g}); each "
                "kill lands at a random point of the lock keeper's extension period "
                "(lock_ttl/3); two workers of 1 process x 8 threads, no sweeper process")
    for ttl, bound, label in ((None, 2 * DEFAULT_TTL, f"defaults (lock_ttl={DEFAULT_TTL:g})"),
                              (SHORT_TTL, SHORT_BOUND, f"lock_ttl={SHORT_TTL:g}")):
        await _setting(ctx, server.url, server.namespace(f"crash{ttl or 0:g}"), ttl, bound,
                       label, samples)


async def _setting(ctx: Context, url: str, namespace: str, ttl: float | None, bound: float,
                   label: str, samples: int) -> None:
    report = ctx.report
    lock_ttl = DEFAULT_TTL if ttl is None else ttl
    os.environ["REACTORFLOW_REDIS_URL"] = url
    os.environ["RF_BENCH_NAMESPACE"] = namespace
    from benchmarks import _crash_flows as flows

    storage = rf.RedisStorage.from_url(url, namespace=namespace)
    rf.configure(storage=storage, lock_ttl=lock_ttl)
    stamps = redis.Redis.from_url(url)
    workers = [_start_worker(url, namespace, ttl) for _ in range(2)]
    killed: set[int] = set()
    resumed: list[float] = []
    carried: list[float] = []
    lapsed: list[float] = []
    patience = 4 * lock_ttl + 150.0  # room for the slowest redelivery, to measure it
    try:
        await _live(killed, 2)
        for _ in range(samples):
            run_ = await flows.crash.dispatch()
            starts = flows.STARTS_KEY + run_.id
            while not stamps.llen(starts):
                await asyncio.sleep(0.005)
            pid = int(stamps.lindex(starts, 0).split()[0])  # type: ignore[union-attr]
            owners = [i for i, w in enumerate(workers) if _has_child(w.pid, pid)]
            await asyncio.sleep(random.uniform(0.2, 0.2 + lock_ttl / 3))
            os.kill(pid, signal.SIGKILL)
            kill = time.time()
            killed.add(pid)
            gone = None
            deadline = time.monotonic() + patience
            while stamps.hget(flows.NEXT_KEY, run_.id) is None:
                if gone is None and await storage.lock_owner(run_.id) is None:
                    gone = time.time()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{label}: the run was not taken over within "
                                       f"{patience:.0f} s of its worker's kill")
                await asyncio.sleep(0.01)
            second = stamps.lindex(starts, 1)
            carry = stamps.hget(flows.NEXT_KEY, run_.id)
            resumed.append(float(second.split()[1]) - kill)  # type: ignore[union-attr]
            carried.append(float(carry.split()[1]) - kill)  # type: ignore[union-attr]
            lapsed.append((gone or kill) - kill)
            done = await flows.crash.wait(run_.id, timeout=60)
            if done.status is not rf.Status.COMPLETED:
                raise RuntimeError(f"{label}: the taken-over run ended {done.status}")
            # the killed worker's group: stop what is left of it, start a fresh one
            for i in owners:
                _stop(workers[i])
                workers[i] = _start_worker(url, namespace, ttl)
            await _live(killed, 2)
    finally:
        for worker in workers:
            _stop(worker)
        stamps.close()
        await storage.aclose()
        os.environ.pop("REACTORFLOW_REDIS_URL", None)
        rf.configure(lock_ttl=DEFAULT_TTL)
    carry_s, lapse = Spread.of(carried), Spread.of(lapsed)
    report.row(f"{label}: kill -> next step starts (median)", carry_s, "s",
               f"worst {max(carried):.2f} s")
    report.row(f"{label}: kill -> interrupted step re-starts", Spread.of(resumed), "s")
    report.row(f"{label}: kill -> lock gone", lapse, "s", "the lock's own lapse")
    report.row(f"{label}: lock gone -> next step starts",
               Spread.of([c - g for c, g in zip(carried, lapsed, strict=True)]), "s",
               "noticing the lapse, pick-up, lock, load")
    report.row(f"baseline: lock_ttl ({label})", lock_ttl, "s")
    report.verdict(f"{label}: kill -> next step <= {bound:g} s", max(carried) <= bound,
                   f"worst {max(carried):.2f} s, median {carry_s.median:.2f} s "
                   f"({max(carried) / lock_ttl:.2f} x lock_ttl)")


def _has_child(parent: int, pid: int) -> bool:
    """Whether `pid` is `parent` or one of its children (the Dramatiq worker process)."""
    if pid == parent:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1]) == parent
    except (OSError, ValueError, IndexError):
        return False
