"""The benchmarks' results as data: what `python -m benchmarks` writes as JSON (msgspec owns the
bytes), the history of the main ratios across runs, and reading both back for the charts.

`latest.json` holds one run whole: the header (machine, versions, git, the Redis and its fsync
policy), then each benchmark's figures (median, min and max over repetitions, unit), its
latency distributions (quantiles of the pooled samples, each repetition's p50/p90/p99, a
histogram) and its verdicts (target, outcome, the figure the verdict reads and the target's
limit). `history.jsonl` gets one line per run: the header's summary and each verdict's value.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

import msgspec

RESULTS = Path(__file__).resolve().parent / "results"
LATEST = RESULTS / "latest.json"
HISTORY = RESULTS / "history.jsonl"
SCHEMA = 1
BINS = 40


class Header(msgspec.Struct, kw_only=True):
    """Where and how the run was made."""

    started_at: float  # Unix time
    quick: bool
    reps: int
    names: list[str]
    python: str
    loop: str
    reactorflow: str
    git: str
    versions: dict[str, str]  # package -> version ("not installed")
    machine: str
    cpus: int
    load_average: list[float]  # 1, 5, 15 minutes, at the start
    redis: str = ""  # the benchmarks' Redis, once one was started
    fsync: str = ""  # its persistence: "appendonly no", "appendonly yes, appendfsync always"


class Figure(msgspec.Struct, kw_only=True):
    """One printed row. `kind` comes from its label: "reactorflow: ..." is the figure under
    test, "baseline: ..." what it is measured against, "ratio ..." the two divided; the rest is
    context. A row that is not a number keeps only its text."""

    label: str
    kind: str  # subject, baseline, ratio, context
    text: str
    unit: str = ""
    note: str = ""
    median: float | None = None
    lo: float | None = None
    hi: float | None = None
    n: int = 0


class Distribution(msgspec.Struct, kw_only=True):
    """Samples of one latency, pooled over repetitions, in `unit`; `group` puts a figure and
    its baseline on one chart."""

    label: str
    group: str
    unit: str
    n: int
    quantiles: list[float]  # q = 0, 1, ..., 100 (nearest rank) of the pooled samples
    p50: list[float]  # per repetition
    p90: list[float]
    p99: list[float]
    edges: list[float]  # histogram: BINS log-spaced bins from the minimum to the maximum
    counts: list[int]


class Verdict(msgspec.Struct, kw_only=True):
    """A target's verdict. `value` is the figure it reads (a ratio where the target is one) and
    `limit` the target's line, both None where there is none (INFO rows, counts)."""

    target: str
    outcome: str  # MET, MISSED, INFO, SKIPPED, ERROR
    figures: str
    value: float | None = None
    limit: float | None = None
    unit: str = ""


class Benchmark(msgspec.Struct, kw_only=True):
    name: str
    title: str
    load: float = 0.0  # the machine's 1-minute load average when the benchmark started
    seconds: float = 0.0
    figures: list[Figure] = msgspec.field(default_factory=list)
    distributions: list[Distribution] = msgspec.field(default_factory=list)
    verdicts: list[Verdict] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)


class Results(msgspec.Struct, kw_only=True):
    schema: int = SCHEMA
    header: Header
    benchmarks: list[Benchmark] = msgspec.field(default_factory=list)
    seconds: float = 0.0

    def load_range(self) -> tuple[float, float]:
        """The lowest and highest 1-minute load average seen during the run (at the start and
        at each benchmark's start): how busy the machine was."""
        seen = [self.header.load_average[0], *(b.load for b in self.benchmarks if b.load)]
        return min(seen), max(seen)


class HistoryEntry(msgspec.Struct, kw_only=True):
    """One run in the history: when, on what, and each verdict's value ("benchmark: target")."""

    started_at: float
    quick: bool
    git: str
    machine: str
    load_average: list[float]
    fsync: str
    values: dict[str, float]
    outcomes: dict[str, str]
    limits: dict[str, float] = msgspec.field(default_factory=dict)
    load_range: list[float] = msgspec.field(default_factory=list)  # Results.load_range


# -- building ----------------------------------------------------------------------------------


def kind_of(label: str) -> str:
    """The role of a printed row, from its label (see `Figure`)."""
    text = label.strip().lower()
    if text.startswith("reactorflow"):
        return "subject"
    if text.startswith("baseline"):
        return "baseline"
    if text.startswith("ratio"):
        return "ratio"
    return "context"


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100) of samples already sorted."""
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def distribution(label: str, group: str, unit: str,
                 repetitions: Sequence[Sequence[float]]) -> Distribution:
    """A Distribution of samples already in `unit`, one list per repetition.

    Raises:
        ValueError: no samples at all.
    """
    pooled = sorted(v for rep in repetitions for v in rep)
    if not pooled:
        raise ValueError(f"distribution {label!r}: no samples")
    reps = [sorted(rep) for rep in repetitions if rep]
    low, high = pooled[0], pooled[-1]
    if low > 0 and high > low:
        step = (math.log(high) - math.log(low)) / BINS
        edges = [math.exp(math.log(low) + i * step) for i in range(BINS + 1)]
    else:
        edges = [low + (high - low) * i / BINS for i in range(BINS + 1)] if high > low \
            else [low, low]
    counts = [0] * (len(edges) - 1)
    for value in pooled:
        index = len(counts) - 1
        for i in range(len(counts)):
            if value < edges[i + 1]:
                index = i
                break
        counts[index] += 1
    return Distribution(
        label=label, group=group, unit=unit, n=len(pooled),
        quantiles=[nearest_rank(pooled, q) for q in range(101)],
        p50=[nearest_rank(r, 50) for r in reps], p90=[nearest_rank(r, 90) for r in reps],
        p99=[nearest_rank(r, 99) for r in reps], edges=edges, counts=counts)


TIMES = "\u00d7"  # the multiplication sign some texts use for "x"
_NUMBER = r"([+-]?\d[\d,]*(?:\.\d+)?)"
_LIMIT = re.compile(r"(?:<=|>=|≤|≥|<|>)\s*" + _NUMBER + r"\s*(x|%|[^\s\d,;:()]+)?")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def limit_of(target: str) -> tuple[float | None, str]:
    """The line a target states and the word after it: "p50 <= 6x SET p50" -> (6.0, "x"),
    "<= 20 µs per step" -> (20.0, "µs"), "<= 3 round trips" -> (3.0, "round"); (None, "")
    where the target states no number after a comparison."""
    match = _LIMIT.search(target.replace(TIMES, "x"))
    if match is None:
        return None, ""
    return _number(match[1]), match[2] or ""


def value_of(figures: str, unit: str) -> float | None:
    """The first number in a verdict's text followed by the target's unit ("5.3x SET" for a
    target in "x", "4.60 ms" for one in "ms"), or None (no unit, or no such number)."""
    if not unit:
        return None
    tail = r"(?![A-Za-z])" if unit[-1].isalpha() else ""
    pattern = _NUMBER + r"\s*" + re.escape(unit) + tail
    match = re.search(pattern, figures.replace(TIMES, "x"))
    return None if match is None else _number(match[1])


# -- writing and reading -------------------------------------------------------------------------


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_bytes(data)
    os.replace(scratch, path)


def write(results: Results, path: Path) -> None:
    """Write `results` as indented JSON to `path` (whole, or not at all)."""
    _atomic_write(path, msgspec.json.format(msgspec.json.encode(results), indent=1) + b"\n")


def read(path: Path) -> Results:
    """The results written by `write`.

    Raises:
        FileNotFoundError: no file at `path`.
        msgspec.ValidationError: the file is not a results file of this schema.
    """
    return msgspec.json.decode(path.read_bytes(), type=Results)


def entry(results: Results) -> HistoryEntry:
    """The history line of one run: every verdict that has a value."""
    values: dict[str, float] = {}
    outcomes: dict[str, str] = {}
    limits: dict[str, float] = {}
    for bench in results.benchmarks:
        for v in bench.verdicts:
            key = f"{bench.name}: {v.target}"
            outcomes[key] = v.outcome
            if v.value is not None:
                values[key] = v.value
            if v.limit is not None:
                limits[key] = v.limit
    h = results.header
    return HistoryEntry(started_at=h.started_at, quick=h.quick, git=h.git, machine=h.machine,
                        load_average=h.load_average, fsync=h.fsync, values=values,
                        outcomes=outcomes, limits=limits, load_range=list(results.load_range()))


def append_history(results: Results, path: Path) -> None:
    """Append the run's `entry` to the history file at `path` (one JSON line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as out:
        out.write(msgspec.json.encode(entry(results)) + b"\n")


def read_history(path: Path) -> list[HistoryEntry]:
    """Every run in the history file, oldest first ([] where there is none).

    Raises:
        ValueError: a line that is not a history entry (naming the file and line).
    """
    if not path.exists():
        return []
    found = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            found.append(msgspec.json.decode(line, type=HistoryEntry))
        except msgspec.DecodeError as exc:
            raise ValueError(f"{path}:{number}: not a history entry ({exc}); remove the line "
                             "or the file") from None
    return found
