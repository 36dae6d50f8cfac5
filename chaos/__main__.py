"""`python -m chaos --quick|--full [--lane redis|cluster|rabbitmq] [--seed N] [--runs N]
[--kills K] [--span S]`: one chaos run; exit status 1 when an invariant was violated.

--quick: 300 runs and 30 faults over 100 s (under 3 minutes with the settling). --full: 5,000
runs and 1,250 faults (about 1,000 of them kills) over 45 minutes. --runs/--kills/--span
override either, for a smaller full-style run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

MODES = {"quick": (300, 30, 100.0), "full": (5000, 1250, 2700.0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", dest="mode", const="quick")
    mode.add_argument("--full", action="store_const", dest="mode", const="full")
    parser.add_argument("--lane", choices=("redis", "cluster", "rabbitmq"), default="redis")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None, help="runs to dispatch")
    parser.add_argument("--kills", type=int, default=None, help="faults to strike")
    parser.add_argument("--span", type=float, default=None,
                        help="seconds over which runs are dispatched and faults strike")
    parser.add_argument("--settle", type=float, default=None,
                        help="the most seconds the settling may take after the faults")
    args = parser.parse_args(argv)
    runs, kills, span = MODES[args.mode or "quick"]
    runs = args.runs if args.runs is not None else runs
    kills = args.kills if args.kills is not None else kills
    if args.span is not None:
        span = args.span
    elif args.runs is not None and args.mode != "full":
        span = max(30.0, runs / 3.0)
    elif args.runs is not None:
        span = max(60.0, runs / 1.85)
    seed = args.seed if args.seed is not None else int(time.time()) % 100000

    from chaos.plan import Plan, rate_per_minute  # noqa: PLC0415

    plan = Plan(lane=args.lane, runs=runs, faults=kills, span=span, seed=seed,
                settle=args.settle if args.settle is not None else max(90.0, span / 10))
    os.environ["CHAOS_RATE_PER_MINUTE"] = str(rate_per_minute(plan))

    from chaos.report import run_and_report  # noqa: PLC0415

    return run_and_report(plan)


if __name__ == "__main__":
    sys.exit(main())
