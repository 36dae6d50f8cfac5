"""Statistics (median, min-max over repetitions) and the printed report."""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Spread:
    """One figure over repetitions: the median, and the min and max across them."""

    median: float
    lo: float
    hi: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("no values")
        return cls(statistics.median(values), min(values), max(values), len(values))

    def scaled(self, factor: float) -> Spread:
        return Spread(self.median * factor, self.lo * factor, self.hi * factor, self.n)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of one repetition's samples."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def ratios(top: Sequence[float], bottom: Sequence[float]) -> Spread:
    """Per-repetition ratios (top[i] / bottom[i]): baseline and subject of one repetition."""
    return Spread.of([t / b for t, b in zip(top, bottom, strict=True)])


def number(value: float) -> str:
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def spread_text(s: Spread, unit: str = "") -> str:
    unit = f" {unit}" if unit else ""
    if s.n == 1:
        return f"{number(s.median)}{unit}"
    return f"{number(s.median)}{unit} ({number(s.lo)}\u2013{number(s.hi)})"


# -- timing ----------------------------------------------------------------------------------------


async def time_per_call(fn: Callable[[], Awaitable[object]], iterations: int) -> float:
    """Mean seconds per call of `await fn()` over `iterations` consecutive calls."""
    clock = time.perf_counter
    start = clock()
    for _ in range(iterations):
        await fn()
    return (clock() - start) / iterations


def settle() -> None:
    """Between repetitions: collect garbage now, not inside the next timed loop."""
    gc.collect()


# -- printing --------------------------------------------------------------------------------------

LABEL = 50


@dataclass(slots=True)
class Verdict:
    benchmark: str
    target: str
    outcome: str  # MET, MISSED, INFO, SKIPPED, ERROR
    figures: str


@dataclass(slots=True)
class Report:
    verdicts: list[Verdict] = field(default_factory=list)
    current: str = ""

    def out(self, text: str = "") -> None:
        print(text, flush=True)

    def section(self, name: str, title: str) -> None:
        self.current = name
        self.out()
        self.out(f"== {name}: {title} ==")

    def note(self, text: str) -> None:
        self.out(f"  {text}")

    def row(self, label: str, value: Spread | float | str, unit: str = "",
            note: str = "") -> None:
        if isinstance(value, Spread):
            text = spread_text(value, unit)
        elif isinstance(value, float | int):
            text = f"{number(value)} {unit}".rstrip()
        else:
            text = value
        tail = f"   {note}" if note else ""
        self.out(f"  {label:<{LABEL}} {text}{tail}")

    def verdict(self, target: str, met: bool | None, figures: str) -> None:
        outcome = "INFO" if met is None else ("MET" if met else "MISSED")
        self.out(f"  TARGET {target}: {outcome} — {figures}")
        self.verdicts.append(Verdict(self.current, target, outcome, figures))

    def skipped(self, reason: str) -> None:
        self.out(f"  SKIPPED: {reason}")
        self.verdicts.append(Verdict(self.current, "-", "SKIPPED", reason))

    def error(self, reason: str) -> None:
        self.out(f"  ERROR: {reason}")
        self.verdicts.append(Verdict(self.current, "-", "ERROR", reason))

    def summary(self, elapsed: float) -> None:
        self.out()
        self.out(f"== summary ({elapsed:.0f} s) ==")
        for v in self.verdicts:
            self.out(f"  {v.outcome:<7} {v.benchmark:<18} {v.target} — {v.figures}")
        sys.stdout.flush()
