"""The cost of payload encryption (`rf.EncryptionCodec`): a 10-step chain whose inputs and step
results are order-sized records (a dict of ten fields, about 210 bytes encoded), run with the
codec against the same run without it, on MemoryStorage and on RedisStorage, in alternating
repetitions of the same process. With the codec every value crossing storage is sealed
(AES-256-GCM, a fresh nonce, bound to its run and step) and a loaded run's values are
authenticated; the difference per step is what a user pays for it.
"""

from __future__ import annotations

import os

import msgspec

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._flows import _compile, unique
from benchmarks._report import Spread, ratios, settle, time_per_call

TITLE = "per-step cost with payload encryption vs without (memory and Redis)"
NEEDS_REDIS = True
STEPS = 10
TARGET_RATIO = 1.15  # on a Redis step (api.md §17 / issue 31)
RECORD = {"customer": "c-000123", "email": "someone@example.org", "street": "12 rue de la Paix",
          "city": "Lyon", "zip": "69001", "country": "FR", "card": "tok_4242424242424242",
          "amount": 129.95, "currency": "EUR", "lines": [f"sku-{i}" for i in range(8)]}


class Start(msgspec.Struct):
    customer: str


def chain(subject: str | None = None) -> rf.Reactor:
    """`s0(customer...) -> record`, then `s<i>(s<i-1>) -> record`: a record crosses each step
    (`subject`: the reactor's `subject=`, for `subject_cost`)."""
    flow = rf.Reactor(unique("codec"), inputs=Start, subject=subject)
    source = ["async def s0(customer: str) -> dict:",
              f"    return dict({RECORD!r}, customer=customer)"]
    for i in range(1, STEPS):
        source += [f"async def s{i}(s{i - 1}: dict) -> dict:",
                   f"    return dict(s{i - 1}, step={i})"]
    namespace = _compile("\n".join(source) + "\n")
    for i in range(STEPS):
        flow.step(namespace[f"s{i}"])
    return flow


async def _lane(ctx: Context, label: str, storage: rf.Storage, runs: int
                ) -> tuple[list[float], list[float]]:
    flow = chain()
    codec = rf.EncryptionCodec(keys={"bench": os.urandom(32)}, current="bench")

    async def one() -> rf.Run:
        return await flow.run(customer="c-1")

    clear: list[float] = []
    sealed: list[float] = []
    rf.configure(storage=storage)
    for use in (None, codec):  # warm-up of both (plans, scripts, connections)
        rf.configure(codec=use)
        for _ in range(ctx.pick(full=50, quick=10)):
            done = await one()
        if done.status is not rf.Status.COMPLETED:
            ctx.report.error(f"{label}: the chain ended {done.status}")
            return [], []
    got = await rf.get_run(done.id)
    if got.steps[f"s{STEPS - 1}"].result["customer"] != "c-1":
        ctx.report.error(f"{label}: a sealed result did not read back")
        return [], []
    for _ in range(ctx.reps):
        for use, into in ((None, clear), (codec, sealed)):
            rf.configure(codec=use)
            settle()
            into.append(await time_per_call(one, runs) / STEPS)
    rf.configure(codec=None)
    return clear, sealed


def _rows(ctx: Context, lane: str, clear: list[float], sealed: list[float]) -> float:
    """The lane's rows: per step with and without, their ratio, and the ratio of the best
    repetitions (the one least disturbed by other work on the machine); returns the latter."""
    us = 1e6
    report = ctx.report
    report.row(f"{lane}, with the codec: per step", Spread.of(sealed).scaled(us), "µs")
    report.row(f"baseline: {lane}, no codec: per step", Spread.of(clear).scaled(us), "µs")
    report.row(f"{lane}: codec / none (per repetition)", ratios(sealed, clear), "x")
    best = min(sealed) / min(clear)
    report.row(f"{lane}: codec / none (best repetition of each)", best, "x",
               note=f"{min(sealed) * us:.1f} vs {min(clear) * us:.1f} µs per step")
    return best


async def run(ctx: Context) -> None:
    report = ctx.report
    try:
        rf.EncryptionCodec(keys={"k": bytes(32)}, current="k")
    except rf.ConfigurationError as exc:
        report.skipped(exc.message)
        return
    us = 1e6
    runs = ctx.pick(full=300, quick=40)
    report.note(f"{ctx.reps} repetitions x {runs} runs of a {STEPS}-step chain per lane, codec "
                "and no codec alternating; figures are per step; the verdict compares the "
                "best repetition of each (the least disturbed on a shared machine)")
    clear_m, sealed_m = await _lane(ctx, "memory", rf.MemoryStorage(), runs)
    if not clear_m:
        return
    _rows(ctx, "MemoryStorage", clear_m, sealed_m)
    try:
        redis_storage = ctx.redis_storage("codec")
    except RuntimeError as exc:
        report.skipped(f"no Redis: {exc}")
        return
    clear_r, sealed_r = await _lane(ctx, "redis", redis_storage, ctx.pick(full=150, quick=20))
    if not clear_r:
        return
    best = _rows(ctx, "RedisStorage", clear_r, sealed_r)
    extra = (min(sealed_r) - min(clear_r)) * us
    report.verdict(f"<= {TARGET_RATIO}x on a Redis step (best repetitions)",
                   best <= TARGET_RATIO,
                   f"{best:.3f}x ({extra:.1f} µs added per step)")
    await ctx.close_storages()
