"""The `reactorflow` command (also `python -m reactorflow`)."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

import anyio

from reactorflow.demo import run_demo
from reactorflow.runtime.sweeper import sweep_once

WORKER_TIMEOUT_MS = 50  # reactorflow.workers.broker.WORKER_TIMEOUT_MS (kept import-free here)


def _import_modules(modules: Sequence[str]) -> None:
    sys.path.insert(0, "")
    for name in modules:
        importlib.import_module(name)


def _demo(args: argparse.Namespace) -> int:
    return run_demo()


def _sweep(args: argparse.Namespace) -> int:
    _import_modules(args.modules)

    async def loop() -> None:
        while True:
            report = await sweep_once(limit=args.limit)
            print(f"sweep: recovered={len(report.recovered)} expired={len(report.expired)} "
                  f"failed={len(report.failed)} enqueued={len(report.enqueued)} "
                  f"skipped={len(report.skipped)}", flush=True)
            if args.once:
                return
            await anyio.sleep(args.interval)

    anyio.run(loop)
    return 0


def _worker(args: argparse.Namespace) -> int:
    # before Dramatiq is imported: its idle poll bound is read from the environment
    os.environ.setdefault("dramatiq_worker_timeout", str(WORKER_TIMEOUT_MS))
    os.environ["REACTORFLOW_WORKER_MODULES"] = ",".join(args.modules)
    from dramatiq.cli import main as dramatiq_main  # noqa: PLC0415 (after the env is set)
    from dramatiq.cli import make_argument_parser  # noqa: PLC0415

    argv = ["reactorflow.workers.entry:broker", *args.modules, "--processes",
            str(args.processes), "--threads", str(args.threads), "--path", *args.path]
    if args.verbose:
        argv.append("-v")
    parsed = make_argument_parser().parse_args(argv)  # type: ignore[no-untyped-call]
    return int(dramatiq_main(parsed) or 0)  # type: ignore[no-untyped-call]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reactorflow",
                                     description="Durable saga-style workflows on asyncio.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the order-saga demo on the embedded default")
    demo.set_defaults(handler=_demo)
    sweep = commands.add_parser("sweep", help="recover stalled runs, periodically")
    sweep.add_argument("modules", nargs="*", help="modules that declare your reactors")
    sweep.add_argument("--interval", type=float, default=30.0, help="seconds between sweeps")
    sweep.add_argument("--limit", type=int, default=1000, help="runs inspected per sweep")
    sweep.add_argument("--once", action="store_true", help="sweep once and exit")
    sweep.set_defaults(handler=_sweep)
    worker = commands.add_parser(
        "worker", help="run Dramatiq workers for the reactors in your modules",
        description="Run Dramatiq worker processes with reactorflow's actors. The broker comes "
                    "from REACTORFLOW_REDIS_URL or an rf.configure(broker=...) in your modules.")
    worker.add_argument("modules", nargs="+", help="modules that declare your reactors")
    worker.add_argument("--processes", "-p", type=int, default=1, help="worker processes")
    worker.add_argument("--threads", "-t", type=int, default=8, help="threads per process")
    worker.add_argument("--path", "-P", nargs="*", default=["."], help="import paths")
    worker.set_defaults(handler=_worker)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s")
    return int(args.handler(args))
