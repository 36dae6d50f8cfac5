"""`python -m benchmarks.charts [--json PATH] [--history PATH] [--out DIR]`: draw the results
of `python -m benchmarks` as PNGs (matplotlib: `nox -s bench` installs it; it is no run-time
dependency of reactorflow).

* `scale.png`: runs/s by processes, a panel per benchmark that adds processes (`scale`: worker
  processes, one line per storage; any other whose rows read "<series>, <N> <who>
  process(es)" in runs/s), whatever points the results hold, each median with its min-max;
* `latency.png`: the latency distributions the benchmarks recorded (the samples pooled over
  repetitions, as a cumulative distribution), each beside the baseline measured in the same run;
* `history.png`: the value of each verdict that reads a ratio (`x`, `%`) across the runs in the
  history file, against its target's line.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from benchmarks import _results

OUT = Path(__file__).resolve().parents[1] / "docs" / "img" / "bench"
# "one Redis, 2 worker process(es)" -> series "one Redis", 2, "worker"
_SCALE_ROW = re.compile(r"^(?P<series>.+?),\s*(?P<n>\d+)\s+(?P<who>[\w-]+\s+)?process", re.I)
SUBJECT, BASELINE, CONTEXT = "#3949ab", "#9e9e9e", "#ef6c00"
COLOURS = (SUBJECT, CONTEXT, "#2e7d32", "#ad1457")


class ChartsError(Exception):
    """What stops the charts: no matplotlib, no results file, or nothing to draw."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ChartsError("matplotlib is not installed: `nox -s bench` installs it (or "
                          "`pip install matplotlib` in the environment that runs the "
                          "benchmarks)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _caption(results: _results.Results) -> str:
    header = results.header
    when = datetime.datetime.fromtimestamp(header.started_at, datetime.UTC)
    low, high = results.load_range()
    load = (f"load average {low:.1f}\u2013{high:.1f} during the run"
            if any(b.load for b in results.benchmarks)
            else f"load average {header.load_average[0]:.1f} at the start")
    return (f"{when:%Y-%m-%d %H:%M} UTC, {header.git}, {header.cpus} CPUs, {load}"
            + (", --quick (rough)" if header.quick else "")
            + (f"; Redis {header.fsync}" if header.fsync else ""))


class Curve(msgspec.Struct):
    """One benchmark's throughput points by processes: series -> [(processes, figure)]."""

    benchmark: str
    processes: str  # what is counted: "worker processes", "client processes"
    series: dict[str, list[tuple[int, _results.Figure]]]


def scale_curves(results: _results.Results) -> list[Curve]:
    """Every benchmark's rows "<series>, <N> <who> process(es)" in runs/s: the scale curve of
    `scale` (worker processes) and of any benchmark that adds processes the same way."""
    curves = []
    for bench in results.benchmarks:
        series: dict[str, list[tuple[int, _results.Figure]]] = defaultdict(list)
        who = ""
        for figure in bench.figures:
            match = _SCALE_ROW.match(figure.label)
            if match is None or figure.median is None or "runs/s" not in figure.unit:
                continue
            who = who or (match["who"] or "").strip()
            series[match["series"]].append((int(match["n"]), figure))
        if series:
            curves.append(Curve(bench.name, f"{who} processes".strip(),
                                {k: sorted(v, key=lambda p: p[0]) for k, v in series.items()}))
    return curves


def draw_scale(plt: Any, results: _results.Results, path: Path) -> bool:
    """Draw scale.png, a panel per benchmark with a curve; False where there is none."""
    curves = scale_curves(results)
    if not curves:
        return False
    fig, axes = plt.subplots(1, len(curves), figsize=(6.2 * len(curves), 4.2), squeeze=False)
    for ax, curve in zip(axes.flat, curves, strict=True):
        for i, (name, points) in enumerate(curve.series.items()):
            xs = [n for n, _ in points]
            mid = [f.median or 0.0 for _, f in points]
            low = [m - (f.lo if f.lo is not None else m) for m, (_, f) in zip(mid, points,
                                                                                 strict=True)]
            high = [(f.hi if f.hi is not None else m) - m for m, (_, f) in zip(mid, points,
                                                                                  strict=True)]
            ax.errorbar(xs, mid, yerr=[low, high], marker="o", capsize=4,
                        color=COLOURS[i % len(COLOURS)], label=name)
            for x, y in zip(xs, mid, strict=True):
                ax.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(6, 4),
                            fontsize=8)
        ax.set_xlabel(curve.processes)
        ax.set_ylabel("runs/s completed")
        ax.set_xticks(sorted({n for points in curve.series.values() for n, _ in points}))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"{curve.benchmark}: runs/s by {curve.processes} (median, min-max bars)",
                     fontsize=10)
    fig.text(0.01, 0.01, _caption(results), fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def latency_groups(results: _results.Results) -> list[tuple[str, list[_results.Distribution]]]:
    """The recorded distributions, by chart: ("benchmark: group", [distributions])."""
    groups: dict[str, list[_results.Distribution]] = {}
    for bench in results.benchmarks:
        for dist in bench.distributions:
            groups.setdefault(f"{bench.name}: {dist.group}", []).append(dist)
    return list(groups.items())


def draw_latency(plt: Any, results: _results.Results, path: Path) -> bool:
    """Draw latency.png (cumulative distributions, log time axis); False where none was
    recorded."""
    groups = latency_groups(results)
    if not groups:
        return False
    from matplotlib import ticker

    columns = 2 if len(groups) > 1 else 1
    rows = (len(groups) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 3.4 * rows), squeeze=False)
    for ax, (title, dists) in zip(axes.flat, groups, strict=False):
        for dist in dists:
            colour = BASELINE if _results.kind_of(dist.label) == "baseline" else SUBJECT
            qs = list(range(101))
            p50, p99 = dist.quantiles[50], dist.quantiles[99]
            ax.step(dist.quantiles, qs, where="post", color=colour, linewidth=1.6,
                    label=f"{dist.label} (p50 {_short(p50)}, p99 "
                          f"{_short(p99)} {dist.unit}; n={dist.n})")
            ax.plot([p50, p99], [50, 99], "o", color=colour, markersize=4)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _short(v)))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel(dists[0].unit)
        ax.set_ylabel("percentile")
        ax.set_ylim(0, 101)
        ax.grid(alpha=0.3, which="both")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(groups):]:
        ax.set_visible(False)
    fig.suptitle("Latency distributions, each beside its baseline (same run)", fontsize=11)
    fig.text(0.01, 0.005, _caption(results), fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _short(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def history_series(history: Sequence[_results.HistoryEntry]) -> dict[str, list[tuple[int, float]]]:
    """Each ratio verdict's values across the runs: key -> [(run index, value)]. Ratios only
    (a target whose line is in x or %): absolute times move with the machine."""
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for index, run in enumerate(history):
        for key, value in run.values.items():
            _, unit = _results.limit_of(key.split(": ", 1)[-1])
            if unit in ("x", "%"):
                series[key].append((index, value))
    return dict(series)


def draw_history(plt: Any, history: Sequence[_results.HistoryEntry], path: Path) -> bool:
    """Draw history.png (one panel per ratio, its target's line dashed); False where the
    history has no ratio."""
    series = history_series(history)
    if not series:
        return False
    columns = 3 if len(series) > 4 else 2 if len(series) > 1 else 1
    rows = (len(series) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 2.7 * rows), squeeze=False)
    labels = [datetime.datetime.fromtimestamp(run.started_at, datetime.UTC).strftime("%m-%d %H:%M")
              + (" q" if run.quick else "")
              + (f"\nload {run.load_range[0]:.0f}\u2013{run.load_range[1]:.0f}"
                 if run.load_range else "") for run in history]
    for ax, (key, points) in zip(axes.flat, sorted(series.items()), strict=False):
        full = [(i, v) for i, v in points if not history[i].quick]
        quick = [(i, v) for i, v in points if history[i].quick]
        if full:
            ax.plot(*zip(*full, strict=True), "o-", color=SUBJECT, label="full run")
        if quick:
            ax.plot(*zip(*quick, strict=True), "o", color=SUBJECT, markerfacecolor="white",
                    label="--quick")
        limits = [history[i].limits.get(key) for i, _ in points]
        line = next((x for x in reversed(limits) if x is not None), None)
        if line is not None:
            ax.axhline(line, color="#c62828", linestyle="--", linewidth=1, label="target")
        bench, target = key.split(": ", 1)
        ax.set_title(f"{bench}\n{target}", fontsize=8)
        ax.set_xticks(range(len(history)), labels, rotation=45, ha="right", fontsize=6)
        ax.set_ylim(0, 1.15 * max([v for _, v in points] + ([line] if line else [])))
        ax.grid(alpha=0.3)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(series):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=6)
    fig.suptitle("Main ratios across runs (q: --quick run); dashed: the target's line",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def render(results_path: Path, history_path: Path, out: Path) -> list[Path]:
    """Draw every chart the files hold data for into `out`; the PNGs written.

    Raises:
        ChartsError: matplotlib missing, the results file missing or unreadable, or nothing
            to draw.
    """
    plt = _pyplot()
    try:
        results = _results.read(results_path)
    except FileNotFoundError:
        raise ChartsError(f"no results at {results_path}: run `python -m benchmarks` first "
                          "(or pass --json PATH)") from None
    except msgspec.DecodeError as exc:
        raise ChartsError(f"{results_path} is not a benchmarks results file ({exc}); run "
                          "`python -m benchmarks` again to rewrite it") from None
    try:
        history = _results.read_history(history_path)
    except ValueError as exc:
        raise ChartsError(str(exc)) from None
    out.mkdir(parents=True, exist_ok=True)
    drawn = {"scale.png": draw_scale(plt, results, out / "scale.png"),
             "latency.png": draw_latency(plt, results, out / "latency.png"),
             "history.png": draw_history(plt, history, out / "history.png")}
    written = [out / name for name, done in drawn.items() if done]
    if not written:
        raise ChartsError(f"nothing to draw: {results_path} has no scale rows or latency "
                          f"distributions and {history_path} no ratio verdicts (run the "
                          "scale or latency benchmarks)")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.charts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=_results.LATEST, metavar="PATH",
                        help="the results file (default benchmarks/results/latest.json)")
    parser.add_argument("--history", type=Path, default=_results.HISTORY, metavar="PATH",
                        help="the history file (default benchmarks/results/history.jsonl)")
    parser.add_argument("--out", type=Path, default=OUT, metavar="DIR",
                        help="where the PNGs go (default docs/img/bench/)")
    args = parser.parse_args(argv)
    try:
        written = render(args.json, args.history, args.out)
    except ChartsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
