"""The benchmarks' results as JSON (`benchmarks/_results.py`): a real run of a benchmark writes
every figure, distribution and verdict with the header, and appends its verdict values to the
history; the parsing of a verdict's line and value; the history's errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from benchmarks import _results
from benchmarks.__main__ import available
from benchmarks._report import Report, Spread, percentile

ROOT = Path(__file__).resolve().parents[2]


def _run_benchmarks(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_a_run_writes_its_figures_and_verdicts_as_json_and_appends_to_the_history(
        tmp_path: Path) -> None:
    latest, history = tmp_path / "latest.json", tmp_path / "history.jsonl"
    for _ in range(2):
        done = _run_benchmarks("engine_chain", "--quick", "--reps", "1", "--json", str(latest),
                               "--history", str(history))
        assert done.returncode == 0, done.stderr
    results = _results.read(latest)
    assert results.header.quick and results.header.reps == 1
    assert results.header.names == ["engine_chain"]
    assert results.header.git and results.header.python.startswith("CPython")
    assert set(results.header.versions) >= {"redis", "msgspec", "anyio"}
    assert len(results.header.load_average) == 3
    (bench,) = results.benchmarks
    assert bench.name == "engine_chain" and bench.seconds > 0
    kinds = {f.kind for f in bench.figures}
    assert {"subject", "baseline"} <= kinds
    numeric = [f for f in bench.figures if f.median is not None]
    assert numeric and all(f.lo is not None and f.hi is not None and f.lo <= f.median <= f.hi
                           for f in numeric)
    assert bench.verdicts and all(v.outcome in ("MET", "MISSED") for v in bench.verdicts)
    assert all(v.limit is not None and v.value is not None for v in bench.verdicts)
    entries = _results.read_history(history)
    assert len(entries) == 2
    key = f"engine_chain: {bench.verdicts[0].target}"
    assert entries[-1].values[key] == bench.verdicts[0].value
    assert entries[-1].outcomes[key] == bench.verdicts[0].outcome
    low, high = results.load_range()  # the machine's load, at the start and at each benchmark's
    assert 0 <= low <= high and entries[-1].load_range == [low, high]


def test_no_history_leaves_the_history_alone(tmp_path: Path) -> None:
    latest, history = tmp_path / "latest.json", tmp_path / "history.jsonl"
    done = _run_benchmarks("engine_chain", "--quick", "--reps", "1", "--json", str(latest),
                           "--history", str(history), "--no-history")
    assert done.returncode == 0, done.stderr
    assert latest.exists() and not history.exists()


def test_the_charts_tool_is_not_listed_as_a_benchmark() -> None:
    assert "charts" not in available()
    assert "engine_chain" in available()


def _recorded() -> _results.Results:
    report = Report()
    report.header = _results.Header(
        started_at=1.0, quick=False, reps=3, names=["latency"], python="CPython 3.11",
        loop="loop", reactorflow="0", git="git abc", versions={}, machine="m", cpus=2,
        load_average=[0.1, 0.2, 0.3])
    report.section("latency", "a latency")
    report.row("reactorflow: call p50", Spread(0.5, 0.4, 0.6, 3), "ms")
    report.row("baseline: SET p50", Spread(0.1, 0.1, 0.2, 3), "ms")
    report.row("ratio call / SET", Spread(5.0, 4.0, 6.0, 3), "x")
    report.row("commands", "3", note="EVALSHA 3")
    report.distribution("reactorflow: call", [[0.001, 0.002], [0.003]], group="call vs SET",
                        unit="ms", scale=1e3)
    report.verdict("call p50 <= 6x SET p50", True, "p50 500 µs = 5.0x SET")
    report.verdict("reported", None, "3 commands")
    return report.results(2.0)


def test_the_report_records_what_it_prints_and_the_json_reads_back(tmp_path: Path) -> None:
    results = _recorded()
    (bench,) = results.benchmarks
    assert [f.kind for f in bench.figures] == ["subject", "baseline", "ratio", "context"]
    assert bench.figures[0].median == 0.5 and bench.figures[0].n == 3
    assert bench.figures[3].median is None and bench.figures[3].text == "3"
    (dist,) = bench.distributions
    assert dist.n == 3 and dist.unit == "ms" and dist.quantiles[0] == pytest.approx(1.0)
    assert dist.p50 == pytest.approx([percentile([1.0, 2.0], 50), 3.0])  # per repetition
    assert [(v.value, v.limit, v.unit) for v in bench.verdicts] == [(5.0, 6.0, "x"),
                                                                    (None, None, "")]
    path = tmp_path / "r" / "latest.json"
    _results.write(results, path)
    assert _results.read(path) == results
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize(("target", "figures", "limit", "unit", "value"), [
    ("continue_ p50 <= 6x SET p50", "p50 435 µs = 5.5x SET, p90 540 µs", 6.0, "x", 5.5),
    ("overhead <= 20 µs per step", "11.9 µs/step (0.59x the target)", 20.0, "µs", 11.9),
    ("continue_ in <= 3 round trips", "3 round trips, 3 commands", 3.0, "round", 3.0),
    ("fan-out map >= 50% of raw Dramatiq's throughput", "48% (1,466 vs 3,000 per second)",
     50.0, "%", 48.0),
    ("deploy-check of 100,003 in-flight runs <= 10 s", "2.31 s (43,000 runs/s)", 10.0, "s",
     2.31),
    ("worker RSS with the sleeping runs <= +5 MB", "-0.4 MB", 5.0, "MB", -0.4),
    ("reactorflow on Redis >= 10\u00d7 faster per step", "28.7\u00d7 (163 vs 4,698 µs/step)",
     10.0, "x", 28.7),
    ("within 5% of the limit, never above it", "mean 1000/s", None, "", None),
    ("1 command per step + a constant per run", "1 per step + 1 per run", None, "", None),
])
def test_a_verdicts_line_and_value_are_read_from_its_texts(
        target: str, figures: str, limit: float | None, unit: str, value: float | None) -> None:
    assert _results.limit_of(target) == (limit, unit)
    assert _results.value_of(figures, unit) == value


def test_a_distribution_keeps_quantiles_and_a_histogram_of_every_sample() -> None:
    dist = _results.distribution("d", "g", "µs", [[float(v) for v in range(1, 51)],
                                                   [float(v) for v in range(51, 101)]])
    pooled = [float(v) for v in range(1, 101)]
    assert dist.n == 100 and len(dist.quantiles) == 101
    assert dist.quantiles == [percentile(pooled, q) for q in range(101)]  # as the rows say
    assert dist.quantiles[0] == 1.0 and dist.quantiles[100] == 100.0
    assert dist.p50 == [percentile(pooled[:50], 50), percentile(pooled[50:], 50)]
    assert sum(dist.counts) == 100 and len(dist.edges) == len(dist.counts) + 1
    assert dist.edges[0] == 1.0 and dist.edges[-1] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="'empty': no samples"):
        _results.distribution("empty", "g", "µs", [[]])


def test_a_bad_history_line_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    _results.append_history(_recorded(), history)
    with history.open("ab") as out:
        out.write(b"{not json\n")
    with pytest.raises(ValueError, match=r"history\.jsonl:2: not a history entry"):
        _results.read_history(history)
    assert _results.read_history(tmp_path / "none.jsonl") == []


def test_a_results_file_of_another_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latest.json"
    path.write_bytes(msgspec.json.encode({"schema": 1, "benchmarks": []}))
    with pytest.raises(msgspec.ValidationError, match="header"):
        _results.read(path)


def test_the_charts_without_matplotlib_say_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import charts

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as where it is not installed
    with pytest.raises(charts.ChartsError, match=r"matplotlib is not installed: `nox -s bench`"):
        charts.render(tmp_path / "latest.json", tmp_path / "history.jsonl", tmp_path / "img")
