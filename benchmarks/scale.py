"""Runs per second completed by 1, 2 and 4 `reactorflow worker` processes (8 threads each) on
one Redis, then on a 3-master Redis Cluster on this machine (the broker stays a Dramatiq
`RedisBroker` on the plain Redis: Dramatiq's Redis broker does not run on a cluster). A batch of
5-step runs is dispatched in bulk once every worker process has answered (a probe run that
returns its process id, until each id is seen); the figure is runs completed per second from the
first dispatch to the last completion, the median of `BATCHES` batches on the same workers. On a
shared machine the figures say more about the machine than about reactorflow: compare them
within one run."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from benchmarks._context import Context
from benchmarks._report import Spread

TITLE = "runs/s completed by 1, 2, 4 worker processes (5-step runs), one Redis and a cluster"
ROOT = Path(__file__).resolve().parents[1]
CLUSTER_ENV = "REACTORFLOW_BENCH_CLUSTER_URL"
PROCESSES = (1, 2, 4)
BATCHES = 3
READY_TIMEOUT = 120.0  # seconds for every worker process to answer a probe


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextmanager
def _cluster() -> Iterator[str]:
    """A 3-master Redis Cluster (REACTORFLOW_BENCH_CLUSTER_URL, or started here)."""
    given = os.environ.get(CLUSTER_ENV)
    if given:
        yield given
        return
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        raise RuntimeError("redis-server and redis-cli are needed for the cluster figures")
    ports = [p for p in random.sample(range(20000, 55000), 200)
             if _bindable(p) and _bindable(p + 10000)][:3]
    directory = tempfile.mkdtemp(prefix="rfbench-cluster-")
    procs = []
    try:
        for port in ports:
            node = Path(directory, str(port))
            node.mkdir()
            procs.append(subprocess.Popen(
                [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file",
                 "nodes.conf", "--dir", str(node)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in ports:
            while subprocess.run([cli, "-p", str(port), "ping"], capture_output=True,
                                 check=False).stdout.strip() != b"PONG":
                time.sleep(0.05)
        subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
                        "--cluster-replicas", "0", "--cluster-yes"], capture_output=True,
                       check=True, timeout=60)
        for port in ports:
            while b"cluster_state:ok" not in subprocess.run(
                    [cli, "-p", str(port), "cluster", "info"], capture_output=True,
                    check=False).stdout:
                time.sleep(0.05)
        yield f"redis+cluster://127.0.0.1:{ports[0]}/0"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


async def _all_answering(processes: int) -> int:
    """Dispatch probe runs, 8 at a time, until `processes` distinct worker processes have run
    one (or READY_TIMEOUT passed); returns how many answered."""
    from benchmarks import _scale_flows as flows

    seen: set[int] = set()
    deadline = time.monotonic() + READY_TIMEOUT
    while len(seen) < processes and time.monotonic() < deadline:
        ids = [(await flows.probe.dispatch()).id for _ in range(8)]
        for run_id in ids:
            done = await flows.probe.wait(run_id, timeout=READY_TIMEOUT)
            if not isinstance(done.value, int):
                raise RuntimeError(f"probe run {run_id} ended {done.status}: {done.error}")
            seen.add(done.value)
    return len(seen)


async def _batch(runs: int) -> float:
    """Dispatch `runs` 5-step runs in bulk; runs completed per second until the last ends."""
    from benchmarks import _scale_flows as flows

    started = time.perf_counter()
    ids = [(await flows.five.dispatch()).id for _ in range(runs)]
    for run_id in ids:
        done = await flows.five.wait(run_id, timeout=300)
        if done.value != 5:
            raise RuntimeError(f"run {run_id} ended {done.status}: {done.error}")
    return runs / (time.perf_counter() - started)


async def _throughput(storage_url: str, broker_url: str, namespace: str, processes: int,
                      runs: int) -> tuple[list[float], int]:
    """Start `processes` worker processes; the rate of each of BATCHES batches, and how many
    processes answered before the first."""
    from benchmarks import _scale_flows as flows

    env = dict(os.environ, PYTHONPATH=str(ROOT), **{
        flows.STORAGE_ENV: storage_url, flows.BROKER_ENV: broker_url,
        flows.NAMESPACE_ENV: namespace})
    env.pop("REACTORFLOW_REDIS_URL", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "reactorflow", "worker", "benchmarks._scale_flows",
         "--processes", str(processes), "--threads", "8"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        answered = await _all_answering(processes)
        return [await _batch(runs) for _ in range(BATCHES)], answered
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()


async def run(ctx: Context) -> None:
    import reactorflow as rf
    from benchmarks import _scale_flows as flows
    from reactorflow import config

    report = ctx.report
    server = ctx.redis()
    runs = ctx.pick(full=1500, quick=150)
    load = os.getloadavg()
    report.note(f"{BATCHES} batches of {runs} runs of a 5-step reactor dispatched in bulk per "
                f"figure (median; min-max beside it), once every worker process answered; workers: "
                f"`reactorflow worker` x N processes x 8 threads; broker: RedisBroker on the "
                f"plain Redis; {os.cpu_count()} CPUs, load average {load[0]:.1f} at the start")
    from dramatiq.brokers.redis import RedisBroker

    targets = [("one Redis", server.url)]
    try:
        cluster = _cluster()
        targets.append(("3-master cluster", cluster.__enter__()))
    except (RuntimeError, subprocess.SubprocessError) as exc:
        cluster = None
        report.note(f"no cluster figures: {exc}")
    try:
        for label, url in targets:
            figures = []
            for processes in PROCESSES:
                namespace = server.namespace(f"scale{processes}")
                storage = rf.RedisStorage.from_url(url, namespace=namespace, retention=3600)
                rf.configure(storage=storage,
                             broker=RedisBroker(url=server.url, namespace=f"{namespace}-dramatiq"))
                try:
                    rates, answered = await _throughput(url, server.url, namespace, processes,
                                                        runs)
                finally:
                    config.reset()
                    await storage.aclose()
                spread = Spread.of(rates)
                figures.append(spread.median)
                report.row(f"{label}, {processes} worker process(es)", spread, "runs/s",
                           f"{spread.median * 5:.0f} steps/s"
                           + ("" if answered == processes else
                              f"; only {answered} of {processes} processes answered a probe"))
                await anyio.sleep(0)
            report.verdict(f"scaling curve on {label}", None,
                           " / ".join(f"{p}: {r:.0f}" for p, r in zip(PROCESSES, figures,
                                                                      strict=True))
                           + " runs/s")
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)
        _ = flows
