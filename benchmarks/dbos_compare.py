"""The same 5-step workflow (5 trivial async steps, each taking the previous result) on DBOS
Transact with SQLite and on reactorflow with Redis: µs per step, and the speed ratio.

DBOS runs in a subprocess (`python -m benchmarks.dbos_compare --child ...`): `DBOS.launch()`
sets up process-wide state (threads, a background event loop, signal handling) that must not
leak into the other benchmarks. Its system database is a SQLite file in a temporary directory
(on the filesystem of $TMPDIR: see the printed path and type). A 0-step workflow is timed too,
so the marginal cost of a DBOS step is shown beside the per-step figure.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import reactorflow as rf
from benchmarks import _flows
from benchmarks._context import Context
from benchmarks._report import Spread, settle, time_per_call

TITLE = "5-step workflow: DBOS Transact on SQLite vs reactorflow on Redis"
NEEDS_REDIS = True
STEPS = 5
TARGET_SPEEDUP = 10.0
MARK = "RFBENCH-RESULT "


def _filesystem(path: str) -> str:
    """The type of the filesystem holding `path` (from /proc/mounts; '?' if unknown)."""
    try:
        mounts = [line.split()[:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "?"
    best = ("", "?")
    real = os.path.realpath(path)
    for parts in mounts:
        if len(parts) < 3:
            continue
        point = parts[1]
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) > len(
                best[0]):
            best = (point, parts[2])
    return best[1]


# -- the DBOS side (child process) -------------------------------------------------------------


def _child(reps: int, iterations: int, warmup: int) -> dict[str, Any]:
    import sqlite3
    from importlib.metadata import version

    from dbos import DBOS, DBOSConfig

    directory = tempfile.mkdtemp(prefix="rfbench-dbos-")
    database = os.path.join(directory, "dbos.sqlite")
    config: DBOSConfig = {
        "name": "rfbench",
        "system_database_url": f"sqlite:///{database}",
        "log_level": "ERROR",
    }
    DBOS(config=config)

    @DBOS.step()
    async def step1(x: int) -> int:
        return x + 1

    @DBOS.step()
    async def step2(x: int) -> int:
        return x + 1

    @DBOS.step()
    async def step3(x: int) -> int:
        return x + 1

    @DBOS.step()
    async def step4(x: int) -> int:
        return x + 1

    @DBOS.step()
    async def step5(x: int) -> int:
        return x + 1

    @DBOS.workflow()
    async def five(x: int) -> int:
        x = await step1(x)
        x = await step2(x)
        x = await step3(x)
        x = await step4(x)
        return await step5(x)

    @DBOS.workflow()
    async def empty(x: int) -> int:
        return x

    async def main() -> dict[str, Any]:
        if await five(0) != STEPS:
            raise RuntimeError("the DBOS workflow returned a wrong value")
        for i in range(warmup):
            await five(i)
            await empty(i)
        t_five: list[float] = []
        t_empty: list[float] = []
        for _ in range(reps):
            start = time.perf_counter()
            for i in range(iterations):
                await five(i)
            t_five.append((time.perf_counter() - start) / iterations)
            start = time.perf_counter()
            for i in range(iterations):
                await empty(i)
            t_empty.append((time.perf_counter() - start) / iterations)
        return {"five": t_five, "empty": t_empty}

    DBOS.launch()
    try:
        result = asyncio.run(main())
    finally:
        DBOS.destroy()
    result.update(
        dbos=version("dbos"), sqlalchemy=version("sqlalchemy"), sqlite=sqlite3.sqlite_version,
        database=database, filesystem=_filesystem(directory),
    )
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)
    return result


def _run_child(reps: int, iterations: int, warmup: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.dbos_compare", "--child", "--reps", str(reps),
               "--iterations", str(iterations), "--warmup", str(warmup)]
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARK):
            found: dict[str, Any] = json.loads(line[len(MARK):])
            return found
    tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
    raise RuntimeError(f"the DBOS subprocess exited {done.returncode}: {' | '.join(tail)}")


# -- the benchmark (parent process) ------------------------------------------------------------


async def run(ctx: Context) -> None:
    report = ctx.report
    if importlib.util.find_spec("dbos") is None:
        report.skipped("the `dbos` package cannot be imported (`nox -s bench` installs it; "
                       "or `pip install dbos`)")
        return
    reps = ctx.reps
    dbos_iterations = ctx.pick(full=120, quick=15)
    rf_runs = ctx.pick(full=400, quick=40)
    report.note(f"{reps} repetitions; DBOS x {dbos_iterations} workflows (subprocess), "
                f"reactorflow x {rf_runs} runs")
    try:
        dbos = await asyncio.to_thread(_run_child, reps, dbos_iterations,
                                       ctx.pick(full=30, quick=5))
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
        report.skipped(f"DBOS could not be measured: {exc}")
        return
    report.note(f"DBOS {dbos['dbos']}, SQLAlchemy {dbos['sqlalchemy']}, SQLite "
                f"{dbos['sqlite']}; database file {dbos['database']} "
                f"({dbos['filesystem']}, default settings)")

    storage = ctx.redis_storage("dbos")
    rf.configure(storage=storage)
    flow, _ = _flows.chain("redis.chain5", STEPS)
    single, _ = _flows.chain("redis.chain1", 1)
    for _ in range(ctx.pick(full=50, quick=10)):
        await flow.run()
        await single.run()
    t_rf: list[float] = []
    t_rf1: list[float] = []
    for _ in range(reps):
        settle()
        t_rf.append(await time_per_call(flow.run, rf_runs))
        settle()
        t_rf1.append(await time_per_call(single.run, rf_runs))

    us = 1e6
    dbos_step = Spread.of([t / STEPS * us for t in dbos["five"]])
    dbos_marginal = Spread.of([(f - e) / STEPS * us
                               for f, e in zip(dbos["five"], dbos["empty"], strict=True)])
    rf_step = Spread.of([t / STEPS * us for t in t_rf])
    speedup = dbos_step.median / rf_step.median
    low, high = dbos_step.lo / rf_step.hi, dbos_step.hi / rf_step.lo
    report.row("DBOS: 5-step workflow", Spread.of(dbos["five"]).scaled(us), "µs/workflow")
    report.row("DBOS: per step (workflow / 5)", dbos_step, "µs/step")
    report.row("DBOS: 0-step workflow (context)", Spread.of(dbos["empty"]).scaled(us),
               "µs/workflow")
    report.row("DBOS: marginal per step ((t5 - t0) / 5, context)", dbos_marginal, "µs/step")
    report.row("reactorflow on Redis: 5-step run", Spread.of(t_rf).scaled(us), "µs/run")
    report.row("reactorflow on Redis: per step (run / 5)", rf_step, "µs/step")
    report.row("reactorflow: 1-step run (context)", Spread.of(t_rf1).scaled(us), "µs/run")
    report.row("reactorflow: marginal per step ((t5 - t1) / 4)",
               Spread.of([(f - o) / (STEPS - 1) * us for f, o in zip(t_rf, t_rf1, strict=True)]),
               "µs/step")
    report.row("speed ratio per step (DBOS / reactorflow)", f"{speedup:.1f}x",
               note=f"(range {low:.1f}-{high:.1f}x: worst and best pairing of repetitions)")
    report.verdict(f"reactorflow on Redis >= {TARGET_SPEEDUP:g}x faster per step",
                   speedup >= TARGET_SPEEDUP,
                   f"{speedup:.1f}x ({rf_step.median:.0f} vs {dbos_step.median:,.0f} µs/step)")


def main() -> None:
    parser = argparse.ArgumentParser(description="the DBOS side of dbos_compare (a subprocess)")
    parser.add_argument("--child", action="store_true", required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    result = _child(args.reps, args.iterations, args.warmup)
    print(MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
