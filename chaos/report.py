"""Runs a plan and prints what the checker found, then the figures (for docs/guarantees.md)."""

from __future__ import annotations

import anyio
import msgspec

from chaos.harness import Harness
from chaos.plan import Plan

SHOWN = 50  # violations printed in full; the rest are counted


def run_and_report(plan: Plan) -> int:
    """One chaos run of `plan`; 0 when every invariant held, 1 otherwise."""
    print(f"chaos: lane={plan.lane} runs={plan.runs} faults={plan.faults} span={plan.span:g}s "
          f"seed={plan.seed}", flush=True)
    harness = Harness(plan, log=lambda line: print(f"chaos: {line}", flush=True))
    figures, report = anyio.run(harness.run)
    for violation in report.violations[:SHOWN]:
        print(f"VIOLATION {violation}")
    if len(report.violations) > SHOWN:
        print(f"... and {len(report.violations) - SHOWN} more")
    for limit in report.limits[:SHOWN]:
        print(f"documented limit: {limit}")
    print("checked: " + ", ".join(f"{k}={v}" for k, v in sorted(report.checked.items())))
    if report.violations:
        print("violations by invariant: " + ", ".join(
            f"{k}={v}" for k, v in sorted(report.by_invariant().items())))
    print("figures: " + msgspec.json.encode(figures).decode())
    print("chaos: " + ("FAILED" if report.violations else "OK"), flush=True)
    return 1 if report.violations else 0
