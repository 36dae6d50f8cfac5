"""The capacity of one Redis primary: runs/s of a 3-step saga as client processes are added.

Each client process (`benchmarks/_capacity_client.py`) runs the saga in-process with
`CONCURRENCY` concurrent `await flow.run()` loops; every process warms up, then all start
together and run for the same seconds, `WINDOWS` times on the same processes. Each point of the
curve reports the runs/s completed by all of them (the median window, min-max beside it) and, for
that window, the CPU the Redis server's main thread used over the window (`INFO cpu`: the
thread that runs every command, whose one core is what saturates), the clients' own CPU, how
busy the whole machine was (`/proc/stat`, other processes included), and the server time per
step (`INFO commandstats`, the EVALSHA calls the runs sent). The curve is measured on a private
Redis at `appendfsync always` (durable mode) and on one with no persistence.

The derived capacity of one primary is one core's second divided by the main thread's CPU per
step, beside the commandstats figure (command execution only).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio

from benchmarks import _capacity_client as client_process
from benchmarks import _redis
from benchmarks._context import Context
from benchmarks._report import Spread

TITLE = "runs/s of a 3-step saga by 1, 2, 3, 4, 6 client processes on one Redis; Redis CPU"
ROOT = Path(__file__).resolve().parents[1]
PROCESSES = (1, 2, 3, 4, 6)
CONCURRENCY = 8  # concurrent runs per client process
STEPS = client_process.STEPS
READY_TIMEOUT = 120.0
WINDOWS = 3  # measured windows per point (the median is reported, min-max beside it)
SENT = ("evalsha", "eval", "evalsha_ro", "eval_ro")  # what the runs send (scripts only)


@dataclass(frozen=True, slots=True)
class Point:
    processes: int
    runs_per_s: float
    redis_main: float  # the Redis main thread's CPU, share of one core (1.0 = one full core)
    redis_process: float  # the whole redis-server process (its background threads too)
    clients: float  # the client processes' CPU, in cores
    machine: float  # share of all the machine's cores busy (every process on it)
    usec_per_step: float  # commandstats: the EVALSHA time per step
    main_usec_per_step: float  # the main thread's CPU per step


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat ((0, 0) where there is none)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0, 0
    ticks = [int(f) for f in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


async def _read(proc: asyncio.subprocess.Process, timeout: float) -> client_process.Message:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout)
    if not line:
        raise RuntimeError(f"client process {proc.pid} ended (exit {await proc.wait()}) "
                           "without answering")
    return client_process.decode(line)


async def _window(server: redis.asyncio.Redis, procs: list[asyncio.subprocess.Process],
                  processes: int, seconds: float) -> Point:
    """One measured window: every client runs `seconds`, started together."""
    await server.config_resetstat()
    main_before, process_before = await _redis.server_cpu(server)
    busy_before, total_before = _machine_ticks()
    began = time.perf_counter()
    go = client_process.encode(client_process.Go(seconds=seconds)) + b"\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(go)
        await proc.stdin.drain()
    done = []
    for proc in procs:
        answer = await _read(proc, seconds + READY_TIMEOUT)
        if not isinstance(answer, client_process.Done):
            raise RuntimeError(f"client process {proc.pid} said {answer!r}, not Done")
        done.append(answer)
    wall = time.perf_counter() - began
    main_after, process_after = await _redis.server_cpu(server)
    busy_after, total_after = _machine_ticks()
    stats = await _redis.command_usec(server)
    runs = sum(d.runs for d in done)
    steps = max(1, runs * STEPS)
    usec = sum(u for name, (_, u) in stats.items() if name in SENT)
    return Point(
        processes=processes,
        runs_per_s=runs / max(d.wall for d in done),
        redis_main=(main_after - main_before) / wall,
        redis_process=(process_after - process_before) / wall,
        clients=sum(d.cpu for d in done) / wall,
        machine=(busy_after - busy_before) / max(1, total_after - total_before),
        usec_per_step=usec / steps,
        main_usec_per_step=(main_after - main_before) * 1e6 / steps,
    )


async def _point(url: str, namespace: str, processes: int, seconds: float) -> list[Point]:
    """Start `processes` clients; WINDOWS measured windows on them."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks._capacity_client", url, f"{namespace}-{i}",
        str(CONCURRENCY), cwd=ROOT, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE) for i in range(processes)]
    server = redis.asyncio.Redis.from_url(url)
    try:
        for proc in procs:
            ready = await _read(proc, READY_TIMEOUT)
            if not isinstance(ready, client_process.Ready):
                raise RuntimeError(f"client process {proc.pid} said {ready!r}, not Ready")
        windows = [await _window(server, procs, processes, seconds)
                   for _ in range(WINDOWS)]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()  # the client's loop ends
    finally:
        await server.aclose()
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
    return windows


async def _curve(ctx: Context, label: str, persistence: tuple[str, ...]) -> None:
    report = ctx.report
    seconds = ctx.pick(full=3.0, quick=1.0)
    server = _redis.start_private(persistence)
    points: list[Point] = []
    try:
        report.out(f"  [redis] {server.description}")
        for processes in PROCESSES[:ctx.pick(full=len(PROCESSES), quick=3)]:
            windows = await _point(server.url, server.namespace(f"cap{processes}"),
                                   processes, seconds)
            rates = Spread.of([w.runs_per_s for w in windows])
            point = sorted(windows, key=lambda w: w.runs_per_s)[len(windows) // 2]  # the median
            points.append(point)
            report.row(f"{label}, {processes} client process(es)", rates, "runs/s",
                       f"{point.runs_per_s * STEPS:,.0f} steps/s; Redis main thread "
                       f"{point.redis_main:.0%} of a core (process {point.redis_process:.0%}), "
                       f"clients {point.clients:.2f} cores, machine {point.machine:.0%} busy; "
                       f"{point.usec_per_step:.0f} µs/step commandstats, "
                       f"{point.main_usec_per_step:.0f} µs/step main-thread CPU")
    finally:
        server.stop()
    best = max(points, key=lambda p: p.runs_per_s)
    first = points[0]
    report.verdict(f"runs/s curve by client processes, {label}", None,
                   " / ".join(f"{p.processes}: {p.runs_per_s:.0f}" for p in points)
                   + f" runs/s; best {best.runs_per_s:.0f} at {best.processes} process(es), "
                   f"Redis main thread {best.redis_main:.0%} of a core, clients "
                   f"{best.clients:.2f} cores, machine {best.machine:.0%} busy")
    capacity = 1e6 / first.main_usec_per_step
    report.verdict(f"derived capacity of one Redis primary, {label}", None,
                   f"1 core / {first.main_usec_per_step:.0f} µs main-thread CPU per step = "
                   f"{capacity:,.0f} steps/s ({capacity / STEPS:,.0f} {STEPS}-step runs/s); "
                   f"commands alone (commandstats {first.usec_per_step:.0f} µs/step): "
                   f"{1e6 / first.usec_per_step:,.0f} steps/s")


async def run(ctx: Context) -> None:
    report = ctx.report
    load = os.getloadavg()
    report.note(f"{CONCURRENCY} concurrent runs per client process, {STEPS}-step saga, "
                f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at the start")
    try:
        await _curve(ctx, "appendfsync always", _redis.DURABLE)
        await _curve(ctx, "no persistence", _redis.PLAIN)
    except RuntimeError as exc:
        if "redis-server" in str(exc):
            report.skipped(f"needs redis-server: {exc}")
            return
        raise
