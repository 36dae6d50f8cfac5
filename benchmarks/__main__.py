"""`python -m benchmarks [--quick] [--reps N] [--json PATH] [--charts] [name ...]`: run the
benchmarks (all by default).

Prints a header (versions, machine), then each benchmark's figures beside its baseline measured
in the same run, with a target verdict (MET / MISSED; INFO where no target is set), then a
summary. The same results are written as JSON (benchmarks/results/latest.json by default) and
the run's verdict values appended to benchmarks/results/history.jsonl; `--charts` then draws
them (`python -m benchmarks.charts`, matplotlib). Exit status: 0 whatever the verdicts; 1 only
when a benchmark crashed (ERROR); 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import pkgutil
import platform
import signal
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
from benchmarks import _results
from benchmarks._context import Context
from benchmarks._report import Report

TOOLS = frozenset({"charts"})  # modules of the package that are not benchmarks
ORDER = ("engine_chain", "engine_instructions", "engine_fanout", "checkpoint_growth",
         "redis_chain", "dbos_compare", "continue_latency", "runs_list", "search_key",
         "deploy_check", "sweep_cost", "map_inline", "map_redis", "map_fanout", "map_memory",
         "gates", "scale", "durable", "capacity", "schedule_latency", "pydantic_cost",
         "codec_cost")


def available() -> list[str]:
    found = [m.name for m in pkgutil.iter_modules(benchmarks.__path__)
             if not m.name.startswith("_") and m.name not in TOOLS]
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


PACKAGES = ("redis", "hiredis", "msgspec", "anyio", "dramatiq", "dbos")


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


def make_header(args: argparse.Namespace, names: list[str]) -> _results.Header:
    loop = asyncio.new_event_loop()
    loop_name = type(loop).__name__
    loop.close()
    return _results.Header(
        started_at=time.time(), quick=args.quick, reps=args.reps, names=names,
        python=f"{platform.python_implementation()} {platform.python_version()}",
        loop=loop_name, reactorflow=reactorflow.__version__, git=_git(),
        versions={name: _version(name) for name in PACKAGES},
        machine=platform.platform(), cpus=os.cpu_count() or 0,
        load_average=[round(v, 2) for v in os.getloadavg()])


def header(report: Report, args: argparse.Namespace, names: list[str]) -> None:
    h = report.header = make_header(args, names)
    v = h.versions
    report.out("reactorflow benchmarks" + (" (--quick: smoke run, figures are rough)"
                                             if args.quick else ""))
    report.out(f"  Python        {h.python}, asyncio loop {h.loop}")
    report.out(f"  reactorflow   {h.reactorflow} at "
               f"{Path(reactorflow.__file__).resolve().parent} ({h.git})")
    report.out(f"  redis-py      {v['redis']} (hiredis {v['hiredis']}, "
               f"in use: {redis.utils.HIREDIS_AVAILABLE})")
    for name in PACKAGES[2:]:
        report.out(f"  {name:<13} {v[name]}")
    report.out(f"  machine       {h.machine}, {h.cpus} CPUs, load average "
               f"{' / '.join(f'{x:.2f}' for x in h.load_average)}")
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
            report.timed(time.perf_counter() - began)


def _ended(how: str, status: int) -> int:
    print(f"{how}: the run stopped before its end, and no results were written (the "
          "benchmarks' own redis-servers are stopped)", file=sys.stderr)
    return status


class Terminated(BaseException):
    """The run got SIGTERM (a CI job's timeout, `kill`): a BaseException, as KeyboardInterrupt
    is, so that no benchmark's `except Exception` takes it for its own failure."""


def _end_on_sigterm() -> None:
    """Make SIGTERM end the run by an exception, as Ctrl-C does, so that every `finally` runs
    and the private redis-servers the benchmarks started are stopped (the default action left
    them running)."""
    def terminated(signum: int, frame: object) -> None:
        raise Terminated

    signal.signal(signal.SIGTERM, terminated)


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
    parser.add_argument("--json", type=Path, default=_results.LATEST, metavar="PATH",
                        help="where to write the results as JSON (default "
                             "benchmarks/results/latest.json)")
    parser.add_argument("--history", type=Path, default=_results.HISTORY, metavar="PATH",
                        help="the history file the run's verdict values are appended to "
                             "(default benchmarks/results/history.jsonl)")
    parser.add_argument("--no-history", action="store_true",
                        help="do not append this run to the history")
    parser.add_argument("--charts", action="store_true",
                        help="then draw the charts into docs/img/bench/ (needs matplotlib: "
                             "nox -s bench installs it)")
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
    _end_on_sigterm()
    try:
        asyncio.run(run_all(names, ctx))
    except (Terminated, KeyboardInterrupt) as exc:
        ended = "SIGTERM" if isinstance(exc, Terminated) else "interrupted"
        return _ended(ended, 143 if isinstance(exc, Terminated) else 130)
    finally:
        ctx.stop()
    elapsed = time.perf_counter() - began
    report.summary(elapsed)
    results = report.results(elapsed)
    _results.write(results, args.json)
    report.out(f"  results written to {args.json}")
    if not args.no_history:
        _results.append_history(results, args.history)
        report.out(f"  verdict values appended to {args.history}")
    if args.charts:
        from benchmarks import charts

        charts.main(["--json", str(args.json), "--history", str(args.history)])
    return 1 if report.crashed else 0


if __name__ == "__main__":
    sys.exit(main())
