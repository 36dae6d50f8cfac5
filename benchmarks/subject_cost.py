"""The cost of a data subject (`rf.Reactor(subject=...)`) on top of payload encryption: the
10-step chain of `codec_cost`, with the codec in both lanes, run by a reactor with a subject
against the same chain without one, on MemoryStorage and on RedisStorage, alternating in the
same process. A run of a subject enters the subject's index with its data key at creation (one
more storage round trip, the key unwrapped once) and seals its values under the data key; a
snapshot reads the key once. Each run here is a new subject's first run (the worst case: its
data key is created) or, in the `repeat` lane, one more run of a subject that has a key.
"""

from __future__ import annotations

import itertools
import os

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._report import Spread, ratios, settle, time_per_call
from benchmarks.codec_cost import STEPS, chain

TITLE = "per-step cost of a subject's data key vs the codec alone (memory and Redis)"
NEEDS_REDIS = True


async def _lane(ctx: Context, storage: rf.Storage, runs: int
                ) -> tuple[list[float], list[float], list[float]]:
    rf.configure(storage=storage,
                 codec=rf.EncryptionCodec(keys={"bench": os.urandom(32)}, current="bench"))
    plain, subject = chain(None), chain("{customer}")
    serial = itertools.count()

    async def without() -> rf.Run:
        return await plain.run(customer="c-1")

    async def first() -> rf.Run:  # a new subject each time: its data key is created
        return await subject.run(customer=f"c-{next(serial)}")

    async def repeat() -> rf.Run:  # a subject that has its key
        return await subject.run(customer="c-1")

    for one in (without, first, repeat):  # warm-up (plans, scripts, connections)
        for _ in range(ctx.pick(full=50, quick=10)):
            done = await one()
    if (await rf.get_run(done.id)).steps[f"s{STEPS - 1}"].result["customer"] != "c-1":
        ctx.report.error("a subject's sealed result did not read back")
        return [], [], []
    lanes: tuple[list[float], list[float], list[float]] = ([], [], [])
    for _ in range(ctx.reps):
        for one, into in zip((without, first, repeat), lanes, strict=True):
            settle()
            into.append(await time_per_call(one, runs) / STEPS)
    rf.configure(codec=None)
    return lanes


async def run(ctx: Context) -> None:
    report = ctx.report
    us = 1e6
    runs = ctx.pick(full=300, quick=40)
    report.note(f"{ctx.reps} repetitions x {runs} runs of a {STEPS}-step chain per lane, the "
                "codec on in every lane, lanes alternating; figures are per step")
    for label, make in (("MemoryStorage", rf.MemoryStorage),
                        ("RedisStorage", lambda: ctx.redis_storage("subject"))):
        try:
            storage = make()
        except RuntimeError as exc:
            report.skipped(f"no Redis: {exc}")
            return
        base, first, repeat = await _lane(ctx, storage, runs if label[0] == "M"
                                          else ctx.pick(full=150, quick=20))
        if not base:
            return
        report.row(f"{label}, a subject's first run: per step", Spread.of(first).scaled(us),
                   "µs")
        report.row(f"{label}, a subject's next run: per step", Spread.of(repeat).scaled(us),
                   "µs")
        report.row(f"baseline: {label}, codec, no subject: per step",
                   Spread.of(base).scaled(us), "µs")
        report.row(f"{label}: next run / no subject", ratios(repeat, base), "x")
    await ctx.close_storages()
