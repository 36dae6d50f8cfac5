"""Memory: the RSS a fresh process gains while reading a stored 100,000-element map's results
through rf.MapResults (a page at a time), beside the same process loading them all as a list
(what a `list[T]` reader gets)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._map_flows import big
from benchmarks._report import Spread

TITLE = "RSS of a process reading a 100,000-element map through rf.MapResults"
NEEDS_REDIS = True
SIZE = 100_000
TARGET_MB = 100.0
ROOT = Path(__file__).resolve().parents[1]


def _read(url: str, namespace: str, run_id: str, mode: str) -> tuple[float, int]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "benchmarks._map_reader", url, namespace, run_id,
                          mode], cwd=ROOT, env=env, capture_output=True, text=True, check=True,
                         timeout=600)
    baseline, peak, seen = (int(v) for v in out.stdout.split())
    return (peak - baseline) / 1024, seen


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    storage = ctx.redis_storage("mapmem")
    namespace = ctx.namespace(storage)
    rf.configure(storage=storage)
    done = await big.run(items=list(range(SIZE)))
    if done.status is not rf.Status.COMPLETED:
        report.error(f"the map ended {done.status}")
        return
    reps = ctx.pick(full=3, quick=1)
    report.note(f"{reps} fresh reader processes per mode; elements are ~110-byte structs; RSS "
                "gain = VmHWM while reading - VmRSS before")
    lazy: list[float] = []
    full: list[float] = []
    for _ in range(reps):
        gained, seen = _read(server.url, namespace, done.id, "lazy")
        if seen != SIZE:
            report.error(f"the lazy reader saw {seen} results, not {SIZE}")
            return
        lazy.append(gained)
        full.append(_read(server.url, namespace, done.id, "list")[0])
    report.row("reactorflow: rf.MapResults, async for over all", Spread.of(lazy), "MB",
               "above the process's baseline")
    report.row("context: the same results loaded as one list", Spread.of(full), "MB")
    report.verdict(f"RSS while reading {SIZE:,} results lazily < {TARGET_MB:g} MB above baseline",
                   Spread.of(lazy).median < TARGET_MB,
                   f"+{Spread.of(lazy).median:.1f} MB (a full list: "
                   f"+{Spread.of(full).median:.1f} MB)")
