"""The engine's work per step in instructions: a 10-step chain on MemoryStorage under callgrind.

Instructions executed do not move with the machine's load or speed (a wall-clock figure read
17-27 µs per step on one machine and 29-47 µs on another, quiet, the same day), so this is the
figure a change to the engine is measured by. The program (`_chain_program.py`) runs under
`valgrind --tool=callgrind` four times: N1 and N2 chains through `await flow.run()`, and N1 and
N2 of the same 10 coroutines awaited directly. Each count includes the interpreter's start, the
imports and a warm-up; the difference between the N2 and N1 counts is the cost of N2 - N1
operations alone. The engine's work per step is

    ((flow(N2) - flow(N1)) - (direct(N2) - direct(N1))) / (N2 - N1) / 10

which, as `engine_chain`'s µs figure, includes everything `run` does (create the run, take and
release its lock, checkpoint each step, the final save, the snapshot) spread over the 10 steps.
`PYTHONHASHSEED=0` keeps the counts repeatable (to a few hundred instructions per step).

Side by side against another checkout (e.g. the commit a change is measured against, unpacked
with `git archive <commit> | tar -x -C /tmp/engine-base`):

    python -m benchmarks.engine_instructions --against /tmp/engine-base

Skipped, with the reason, where valgrind is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks._context import Context
from benchmarks._report import Report

TITLE = "10-step chain on MemoryStorage under callgrind: the engine's instructions per step"
NEEDS_REDIS = False
STEPS = 10
PROGRAM = Path(__file__).with_name("_chain_program.py")
HERE = Path(__file__).resolve().parent.parent  # the checkout these benchmarks belong to
BASELINE_PER_STEP = 89_455
"""Instructions per step at d3e281a (before issue 30's engine round), measured by this program
at its full sizes (100 and 600 runs; `--quick`'s are rough beside it): the target is 30% fewer,
measured side by side (`--against`)."""
TARGET_CUT = 0.30


@dataclass(frozen=True, slots=True)
class Count:
    """Instructions per operation of one checkout."""

    flow_run: float  # one `await flow.run()` of the 10-step chain
    direct: float  # the same 10 coroutines awaited in a row

    @property
    def per_step(self) -> float:
        return (self.flow_run - self.direct) / STEPS


def valgrind() -> str | None:
    """The valgrind executable, or None when it is not installed."""
    return shutil.which("valgrind")


async def _instructions(tree: Path, mode: str, n: int, out_dir: str) -> int:
    """Instructions callgrind counted for the whole program run with `mode` and `n`."""
    out = os.path.join(out_dir, f"{mode}-{n}.out")
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
    tool = valgrind()
    assert tool is not None
    proc = await asyncio.create_subprocess_exec(
        tool, "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, str(PROGRAM),
        mode, str(n), env=env, cwd=out_dir, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await proc.communicate()
    if proc.returncode != 0:
        tail = (stdout + stderr).decode(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(f"callgrind run of {PROGRAM.name} {mode} {n} against {tree} "
                           f"failed ({proc.returncode}): {' / '.join(tail)}")
    for line in Path(out).read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no 'summary:' line in callgrind's output {out}")


async def count(tree: Path, n1: int, n2: int) -> Count:
    """Instructions per operation for the checkout at `tree` (two at a time: 2 cores)."""
    with tempfile.TemporaryDirectory(prefix="rf-callgrind-") as out_dir:
        f1, f2 = await asyncio.gather(_instructions(tree, "flow", n1, out_dir),
                                      _instructions(tree, "flow", n2, out_dir))
        d1, d2 = await asyncio.gather(_instructions(tree, "direct", n1, out_dir),
                                      _instructions(tree, "direct", n2, out_dir))
    return Count((f2 - f1) / (n2 - n1), (d2 - d1) / (n2 - n1))


def _rows(report: Report, name: str, c: Count) -> None:
    report.row(f"{name}: await flow.run(), 10 steps", round(c.flow_run), "instructions/run")
    report.row(f"{name}: the same 10 coroutines awaited", round(c.direct), "instructions/run")
    report.row(f"{name}: engine work per step", round(c.per_step), "instructions/step")


async def run(ctx: Context) -> None:
    report = ctx.report
    if valgrind() is None:
        report.skipped("valgrind is not installed (apt-get install valgrind): the instruction "
                       "counts need callgrind")
        return
    n1, n2 = ctx.pick(full=100, quick=20), ctx.pick(full=600, quick=120)
    report.note(f"callgrind counts of {n1} and {n2} operations, differenced; "
                "deterministic whatever the machine's load")
    here = await count(HERE, n1, n2)
    _rows(report, "this checkout", here)
    cut = 1 - here.per_step / BASELINE_PER_STEP
    report.row("d3e281a (before this round), measured", f"{BASELINE_PER_STEP:,} instructions/step")
    report.verdict(f"engine work per step >= {TARGET_CUT:.0%} below d3e281a's",
                   cut >= TARGET_CUT,
                   f"{here.per_step:,.0f} instructions/step, {cut:.0%} below {BASELINE_PER_STEP:,}"
                   " (side by side: python -m benchmarks.engine_instructions --against TREE)")


async def _compare(against: Path, n1: int, n2: int) -> None:
    report = Report()
    report.section("engine_instructions", TITLE)
    base = await count(against, n1, n2)
    here = await count(HERE, n1, n2)
    _rows(report, f"baseline {against}", base)
    _rows(report, f"this checkout {HERE}", here)
    report.row("cut in engine work per step", f"{1 - here.per_step / base.per_step:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine_instructions",
                                     description="The engine's instructions per step, side by "
                                                 "side with another checkout.")
    parser.add_argument("--against", type=Path, required=True,
                        help="another checkout of the repository (its reactorflow/ is measured)")
    parser.add_argument("--n1", type=int, default=100)
    parser.add_argument("--n2", type=int, default=600)
    args = parser.parse_args()
    if valgrind() is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    if not (args.against / "reactorflow" / "__init__.py").is_file():
        raise SystemExit(f"--against {args.against}: no reactorflow/ package there")
    asyncio.run(_compare(args.against.resolve(), args.n1, args.n2))


if __name__ == "__main__":
    main()
