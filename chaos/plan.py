"""What a chaos run does: its mix of reactors and its counts (no reactorflow import, so the
rate limit can be set in the environment before chaos.flows is imported)."""

from __future__ import annotations

from dataclasses import dataclass

# (reactor, share of the runs); the inputs are drawn by `_inputs`
MIX: tuple[tuple[str, int], ...] = (
    ("chaos.saga", 24), ("chaos.fanout", 14), ("chaos.survey", 10), ("chaos.locked", 14),
    ("chaos.pooled", 10), ("chaos.rated", 8), ("chaos.ordered", 12), ("chaos.approval", 8),
    ("chaos.napper", 8),
)
ACCOUNTS = ("a1", "a2", "a3")
UNDONE_REACTORS = frozenset({"chaos.saga", "chaos.fanout"})


@dataclass(frozen=True)
class Plan:
    lane: str = "redis"
    runs: int = 300
    faults: int = 30
    span: float = 100.0  # seconds over which runs are dispatched and faults strike
    settle: float = 90.0  # the most the settling may take once the faults stop
    seed: int = 1
    workers: int = 2



def rate_per_minute(plan: Plan) -> int:
    """A limit below the rate at which `plan` starts rate-limited runs, so that it binds."""
    share = dict(MIX)["chaos.rated"] / sum(dict(MIX).values())
    return max(4, int(plan.runs * share / max(plan.span / 60, 1) * 0.8))


