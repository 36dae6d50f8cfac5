"""Statistics (median, min-max over repetitions), and the report: printed, and recorded as data
(`benchmarks._results`) for the JSON and the charts."""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from benchmarks._results import (
    Benchmark,
    Figure,
    Header,
    Results,
    Verdict,
    distribution,
    kind_of,
    limit_of,
    nearest_rank,
    value_of,
)


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
    return nearest_rank(sorted(values), q)


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


async def time_each(subjects: Mapping[str, Callable[[], Awaitable[object]]], reps: int,
                    calls: int) -> dict[str, list[float]]:
    """Mean seconds per call of each subject, one figure per repetition: every subject called
    once to warm up, then in each repetition (garbage collected first) each one `calls` times
    in a row, in the order given."""
    for fn in subjects.values():
        await fn()
    timings: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(reps):
        settle()
        for name, fn in subjects.items():
            timings[name].append(await time_per_call(fn, calls))
    return timings


def settle() -> None:
    """Between repetitions: collect garbage now, not inside the next timed loop."""
    gc.collect()


# -- printing (and recording: every row, distribution and verdict goes into the results) ------

LABEL = 50


@dataclass(slots=True)
class Report:
    """Prints the report and records the same figures as data (`benchmarks._results`)."""

    benchmarks: list[Benchmark] = field(default_factory=list)
    header: Header | None = None
    current: str = ""

    def out(self, text: str = "") -> None:
        print(text, flush=True)

    def section(self, name: str, title: str) -> None:
        self.current = name
        self.benchmarks.append(Benchmark(name=name, title=title,
                                         load=round(os.getloadavg()[0], 2)))
        self.out()
        self.out(f"== {name}: {title} ==")

    def _bench(self) -> Benchmark:
        if not self.benchmarks:  # a row before any section: recorded under "-"
            self.benchmarks.append(Benchmark(name="-", title=""))
        return self.benchmarks[-1]

    def note(self, text: str) -> None:
        self.out(f"  {text}")
        if self.benchmarks:
            self._bench().notes.append(text)

    def row(self, label: str, value: Spread | float | str, unit: str = "",
            note: str = "") -> None:
        figure = Figure(label=label.strip(), kind=kind_of(label), text="", unit=unit, note=note)
        if isinstance(value, Spread):
            text = spread_text(value, unit)
            figure.median, figure.lo, figure.hi, figure.n = (value.median, value.lo, value.hi,
                                                             value.n)
        elif isinstance(value, float | int):
            text = f"{number(value)} {unit}".rstrip()
            figure.median = figure.lo = figure.hi = float(value)
            figure.n = 1
        else:
            text = value
        figure.text = text
        self._bench().figures.append(figure)
        tail = f"   {note}" if note else ""
        self.out(f"  {label:<{LABEL}} {text}{tail}")

    def distribution(self, label: str, repetitions: Sequence[Sequence[float]], *, group: str,
                     unit: str = "µs", scale: float = 1e6) -> None:
        """Record the samples of one latency (seconds, one list per repetition) for the JSON
        and the charts, scaled to `unit`; the figures `group` names share one chart. Prints
        nothing: the rows already say the percentiles."""
        scaled = [[v * scale for v in rep] for rep in repetitions]
        if any(scaled):
            self._bench().distributions.append(distribution(label, group, unit, scaled))

    def verdict(self, target: str, met: bool | None, figures: str, *,
                value: float | None = None) -> None:
        """Print and record a target's verdict. `value` is the figure it reads; by default the
        first figure in `figures` in the unit of the target's line (its "6x", "50%")."""
        outcome = "INFO" if met is None else ("MET" if met else "MISSED")
        self.out(f"  TARGET {target}: {outcome} — {figures}")
        limit, unit = limit_of(target)
        if value is None:
            value = value_of(figures, unit)
        self._bench().verdicts.append(Verdict(target=target, outcome=outcome, figures=figures,
                                              value=value, limit=limit, unit=unit))

    def skipped(self, reason: str) -> None:
        self.out(f"  SKIPPED: {reason}")
        self._bench().verdicts.append(Verdict(target="-", outcome="SKIPPED", figures=reason))

    def error(self, reason: str) -> None:
        self.out(f"  ERROR: {reason}")
        self._bench().verdicts.append(Verdict(target="-", outcome="ERROR", figures=reason))

    def timed(self, seconds: float) -> None:
        """The current benchmark took `seconds`."""
        self._bench().seconds = seconds
        self.note(f"({seconds:.1f} s)")

    @property
    def crashed(self) -> bool:
        return any(v.outcome == "ERROR" for b in self.benchmarks for v in b.verdicts)

    def results(self, seconds: float) -> Results:
        """Everything recorded, with the header (set by the caller before the run)."""
        if self.header is None:
            raise RuntimeError("Report.header is not set: python -m benchmarks sets it")
        return Results(header=self.header, benchmarks=self.benchmarks, seconds=seconds)

    def summary(self, elapsed: float) -> None:
        self.out()
        self.out(f"== summary ({elapsed:.0f} s) ==")
        for bench in self.benchmarks:
            for v in bench.verdicts:
                self.out(f"  {v.outcome:<7} {bench.name:<18} {v.target} — {v.figures}")
        sys.stdout.flush()
