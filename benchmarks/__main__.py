"""`python -m benchmarks [--quick] [--reps N] [name ...]`: run the benchmarks (all by default).

Prints a header (versions, machine), then each benchmark's figures beside its baseline measured
in the same run, with a target verdict (MET / MISSED; INFO where no target is set), then a
summary. Exit status: 0 whatever the verdicts; 1 only when a benchmark crashed (ERROR); 2 for a
bad command line.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import pkgutil
import platform
import subprocess
import sys
import time
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType

import redis.utils

import benchmarks
import reactorflow
import reactorflow.config
from benchmarks._context import Context
from benchmarks._report import Report

ORDER = ("engine_chain", "engine_instructions", "engine_fanout", "checkpoint_growth",
         "redis_chain", "dbos_compare", "continue_latency", "runs_list", "search_key",
         "deploy_check", "sweep_cost", "map_inline",
         "map_redis", "map_fanout", "map_memory", "gates", "scale", "schedule_latency",
         "pydantic_cost")


def available() -> list[str]:
    found = [m.name for m in pkgutil.iter_modules(benchmarks.__path__)
             if not m.name.startswith("_")]
    return [n for n in ORDER if n in found] + sorted(n for n in found if n not in ORDER)


def select(names: list[str]) -> list[str]:
    every = available()
    if not names:
        return every
    chosen: list[str] = []
    for name in names:
        matches = [n for n in every if n == name] or [n for n in every if n.startswith(name)]
        if not matches:
            raise SystemExit(f"error: {name!r} is not a benchmark; the benchmarks are: "
                             f"{', '.join(every)}")
        chosen += [n for n in matches if n not in chosen]
    return chosen


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _git() -> str:
    root = Path(reactorflow.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=True).stdout
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "reactorflow"], capture_output=True, text=True, timeout=5,
                               check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "no git"
    return f"git {head.strip()}" + (" + uncommitted changes in reactorflow/" if dirty else "")


def header(report: Report, args: argparse.Namespace, names: list[str]) -> None:
    loop = asyncio.new_event_loop()
    loop_name = type(loop).__name__
    loop.close()
    report.out("reactorflow benchmarks" + (" (--quick: smoke run, figures are rough)"
                                             if args.quick else ""))
    report.out(f"  Python        {platform.python_implementation()} {platform.python_version()}"
               f", asyncio loop {loop_name}")
    report.out(f"  reactorflow   {reactorflow.__version__} at "
               f"{Path(reactorflow.__file__).resolve().parent} ({_git()})")
    report.out(f"  redis-py      {_version('redis')} (hiredis {_version('hiredis')}, "
               f"in use: {redis.utils.HIREDIS_AVAILABLE})")
    report.out(f"  msgspec       {_version('msgspec')}")
    report.out(f"  anyio         {_version('anyio')}")
    report.out(f"  dbos          {_version('dbos')}")
    report.out(f"  machine       {platform.platform()}, {os.cpu_count()} CPUs")
    report.out(f"  repetitions   {args.reps}; running: {', '.join(names)}")


async def run_all(names: list[str], ctx: Context) -> None:
    report = ctx.report
    for name in names:
        try:
            module: ModuleType = importlib.import_module(f"benchmarks.{name}")
        except ImportError as exc:  # a missing package: the others still run
            report.section(name, name)
            report.error(f"cannot import benchmarks.{name}: {exc} (nox -s bench installs what "
                         "the benchmarks need)")
            continue
        report.section(name, getattr(module, "TITLE", name))
        began = time.perf_counter()
        try:
            if getattr(module, "NEEDS_REDIS", False):
                try:
                    ctx.redis()
                except RuntimeError as exc:
                    report.skipped(f"needs Redis: {exc}")
                    continue
            await module.run(ctx)
        except Exception as exc:
            report.error(f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
        finally:
            reactorflow.config.reset()
            await ctx.close_storages()
            report.note(f"({time.perf_counter() - began:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*",
                        help="benchmarks to run (a prefix selects every match); all by default")
    parser.add_argument("--quick", action="store_true",
                        help="a fast smoke run: few repetitions and iterations")
    parser.add_argument("--reps", type=int, default=None,
                        help="repetitions per figure (default 5; 2 with --quick)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name in available():
            module = importlib.import_module(f"benchmarks.{name}")
            print(f"{name:<20} {getattr(module, 'TITLE', '')}")
        return 0
    try:
        names = select(args.names)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.reps is None:
        args.reps = 2 if args.quick else 5
    if args.reps < 1:
        print("error: --reps must be at least 1", file=sys.stderr)
        return 2
    report = Report()
    header(report, args, names)
    ctx = Context(report=report, quick=args.quick, reps=args.reps)
    began = time.perf_counter()
    try:
        asyncio.run(run_all(names, ctx))
    finally:
        ctx.stop()
    report.summary(time.perf_counter() - began)
    return 1 if any(v.outcome == "ERROR" for v in report.verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
