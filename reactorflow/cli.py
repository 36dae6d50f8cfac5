"""The `reactorflow` command (also `python -m reactorflow`)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence


def _import_modules(modules: Sequence[str]) -> None:
    sys.path.insert(0, "")
    for name in modules:
        importlib.import_module(name)


def _demo(args: argparse.Namespace) -> int:
    from reactorflow.demo import run_demo

    return run_demo()


def _sweep(args: argparse.Namespace) -> int:
    import anyio

    from reactorflow.runtime.sweeper import sweep_once

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s")
    return int(args.handler(args))
