"""Engine overhead per step: a 10-step chain of trivial async steps on MemoryStorage.

overhead per step = (time of `await flow.run()` - time of awaiting the same 10 coroutines
directly) / 10, per repetition. The run includes everything `run` does (create the run, take
and release its lock, checkpoint each step, save the final state, read the snapshot back), so
its fixed per-run cost is spread over the 10 steps; a 20-step chain measured alongside splits
the figure into a marginal cost per step and a fixed cost per run.
"""

from __future__ import annotations

import reactorflow as rf
from benchmarks import _flows
from benchmarks._context import Context
from benchmarks._report import Spread, settle, time_per_call

TITLE = "10-step chain on MemoryStorage vs the same 10 awaits (engine overhead per step)"
NEEDS_REDIS = False
TARGET_US = 20.0


async def run(ctx: Context) -> None:
    report = ctx.report
    reps = ctx.reps
    runs = ctx.pick(full=2000, quick=150)
    direct_calls = runs * 10
    flow10, steps10 = _flows.chain("chain10", 10)
    flow20, _ = _flows.chain("chain20", 20)
    report.note(f"{reps} repetitions x {runs} runs (direct: x {direct_calls} calls); "
                "a fresh MemoryStorage per repetition")

    async def direct() -> int:
        return await _flows.await_chain(steps10)

    rf.configure(storage=rf.MemoryStorage())
    for _ in range(ctx.pick(full=200, quick=30)):  # warm-up (plans compiled, caches filled)
        await flow10.run()
        await flow20.run()
        await direct()
    first = await flow10.run()
    if first.status is not rf.Status.COMPLETED or first.value != 9:
        report.error(f"the chain did not complete as expected: {first.status} {first.value!r}")
        return

    t10: list[float] = []
    t20: list[float] = []
    tdirect: list[float] = []
    for _ in range(reps):
        rf.configure(storage=rf.MemoryStorage())
        settle()
        tdirect.append(await time_per_call(direct, direct_calls))
        settle()
        t10.append(await time_per_call(flow10.run, runs))
        settle()
        t20.append(await time_per_call(flow20.run, runs))

    us = 1e6
    overhead = Spread.of([(a - d) / 10 * us for a, d in zip(t10, tdirect, strict=True)])
    marginal = Spread.of([(b - a) / 10 * us for a, b in zip(t10, t20, strict=True)])
    fixed = Spread.of([(a - (b - a)) * us for a, b in zip(t10, t20, strict=True)])
    report.row("reactorflow: await flow.run(), 10 steps", Spread.of(t10).scaled(us), "µs/run")
    report.row("baseline: the same 10 coroutines awaited", Spread.of(tdirect).scaled(us),
               "µs/run")
    report.row("reactorflow: await flow.run(), 20 steps", Spread.of(t20).scaled(us), "µs/run")
    report.row("engine overhead per step ((run - direct) / 10)", overhead, "µs/step")
    report.row("  marginal cost of one step ((t20 - t10) / 10)", marginal, "µs/step")
    report.row("  fixed cost per run (t10 - 10 x marginal)", fixed, "µs/run")
    report.verdict(f"overhead <= {TARGET_US:g} µs per step", overhead.median <= TARGET_US,
                   f"{overhead.median:.1f} µs/step "
                   f"({overhead.median / TARGET_US:.2f}x the target)")
