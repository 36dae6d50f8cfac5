"""The charts (`python -m benchmarks.charts`): drawn from a results file and a history made by
the report, one PNG per chart that has data; clear errors where there is nothing to draw.
Skipped where matplotlib is not installed (the `test` extra brings it; the library never
imports it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import _results, charts
from benchmarks._report import Report, Spread

pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"


def _results_of(*, scale: bool = True, latency: bool = True, ratio: float = 5.0,
                started_at: float = 1.8e9) -> _results.Results:
    report = Report()
    report.header = _results.Header(
        started_at=started_at, quick=False, reps=3, names=["scale", "latency"],
        python="CPython 3.11", loop="loop", reactorflow="0", git="git abc", versions={},
        machine="m", cpus=2, load_average=[0.1, 0.2, 0.3], fsync="appendonly no")
    if scale:
        report.section("scale", "runs/s")
        for processes, rate in ((1, 400.0), (2, 520.0), (4, 560.0)):
            report.row(f"one Redis, {processes} worker process(es)",
                       Spread(rate, rate - 20, rate + 20, 3), "runs/s")
        report.row("3-master cluster, 1 worker process(es)", Spread(300, 280, 320, 3), "runs/s")
        report.row("one Redis, commands per run", "6")  # not a point of the curve
    if latency:
        report.section("latency", "a latency")
        report.distribution("reactorflow: call", [[0.0004 + i * 1e-6 for i in range(50)]],
                            group="call vs SET")
        report.distribution("baseline: SET", [[0.0001 + i * 1e-7 for i in range(50)]],
                            group="call vs SET")
        report.verdict("call p50 <= 6x SET p50", ratio <= 6, f"{ratio:.1f}x SET")
        report.verdict("call in <= 3 round trips", True, "3 round trips")  # not a ratio
    return report.results(1.0)


def _files(tmp_path: Path, *runs: _results.Results) -> tuple[Path, Path]:
    latest, history = tmp_path / "latest.json", tmp_path / "history.jsonl"
    for results in runs:
        _results.write(results, latest)
        _results.append_history(results, history)
    return latest, history


def test_every_chart_is_drawn_from_the_results_and_the_history(tmp_path: Path) -> None:
    latest, history = _files(tmp_path, _results_of(ratio=5.5, started_at=1.8e9),
                             _results_of(ratio=4.8, started_at=1.8e9 + 3600))
    out = tmp_path / "img"
    assert charts.main(["--json", str(latest), "--history", str(history),
                        "--out", str(out)]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written == ["history.png", "latency.png", "scale.png"]
    for name in written:
        assert (out / name).read_bytes()[:8] == PNG


def test_the_scale_curve_takes_every_process_count_the_results_hold() -> None:
    (curve,) = charts.scale_curves(_results_of())
    assert curve.benchmark == "scale" and curve.processes == "worker processes"
    assert {name: [n for n, _ in p] for name, p in curve.series.items()} == {
        "one Redis": [1, 2, 4], "3-master cluster": [1]}
    assert [f.median for _, f in curve.series["one Redis"]] == [400.0, 520.0, 560.0]


def test_the_history_plots_ratio_verdicts_only(tmp_path: Path) -> None:
    _, history = _files(tmp_path, _results_of(ratio=5.5), _results_of(ratio=4.8))
    series = charts.history_series(_results.read_history(history))
    assert series == {"latency: call p50 <= 6x SET p50": [(0, 5.5), (1, 4.8)]}


def test_only_the_charts_with_data_are_drawn(tmp_path: Path) -> None:
    latest, history = _files(tmp_path, _results_of(scale=False))
    written = charts.render(latest, history, tmp_path / "img")
    assert [p.name for p in written] == ["latency.png", "history.png"]


def test_nothing_to_draw_and_no_results_are_clear_errors(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    latest, history = _files(tmp_path, _results_of(scale=False, latency=False))
    with pytest.raises(charts.ChartsError, match="nothing to draw"):
        charts.render(latest, history, tmp_path / "img")
    missing = tmp_path / "none.json"
    assert charts.main(["--json", str(missing), "--history", str(history),
                        "--out", str(tmp_path / "img")]) == 1
    assert f"no results at {missing}: run `python -m benchmarks` first" in capsys.readouterr().err
    missing.write_text("[1, 2]")
    with pytest.raises(charts.ChartsError, match="is not a benchmarks results file"):
        charts.render(missing, history, tmp_path / "img")
