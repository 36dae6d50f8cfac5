"""`reactorflow deploy-check` (`inventory.deploy_check`: every in-flight run listed from the
status indexes, its records read by `Storage.load_runs`, classified by `migrating.dry_run`)
over 100,000 paused runs on Redis, half on version 2 (continues), the others on version 1 with
version 1's module gone: 9 in 10 of them migrate (the migration's dry run fits), 1 in 10
would be stranded. Against the floor measured in the same run: the same keys read by hand, the
status index then one pipelined HMGET + HGETALL per run, 500 runs a round trip, nothing
decoded."""

from __future__ import annotations

import time
from collections import Counter

import msgspec
import redis.asyncio

import reactorflow as rf
from benchmarks import _deploy_flows as flows
from benchmarks._context import Context
from benchmarks._report import Spread, settle
from benchmarks._stored import BATCH, Writer, bulk_storage, store_runs
from reactorflow import config, records
from reactorflow.definition import naming
from reactorflow.runtime.ops import inventory
from reactorflow.storage.contract.values import StoredRun
from reactorflow.storage.redis.keys import HEAD_FIELDS, RedisKeys

TITLE = "deploy-check over 100,000 in-flight runs on Redis vs a hand-written read of their keys"
NEEDS_REDIS = True
TARGET_S = 10.0
OWNER = "bench"


async def _templates() -> dict[str, StoredRun]:
    """One run of each kind, made by the real engine: version 1 waiting on `approve`, version
    1 waiting on `review`, version 2 waiting on `approve`."""
    naming.forget(flows.checkout)
    try:
        first = await flows.checkout_v1.run(item="tea")
        second = await flows.checkout_v1.run(item="gin")
        await flows.checkout_v1.continue_(second.id, step="approve", payload={"ok": True})
    finally:
        naming.register(flows.checkout)
    current = await flows.checkout.run(item="tea")
    storage = config.current_storage()
    made = {"migrates": first.id, "stranded": second.id, "continues": current.id}
    found = {kind: await storage.load_run(run_id) for kind, run_id in made.items()}
    return {kind: stored for kind, stored in found.items() if stored is not None}


def _kind(i: int) -> str:
    return "continues" if i % 2 == 0 else "stranded" if i % 10 == 1 else "migrates"


def _copies(count: int, templates: dict[str, StoredRun]) -> Writer:
    """A writer of `count` copies of the templates (`_kind`), each stored by `create_run` and
    one `save_state` (its step records, its lock released)."""
    started = time.time() - count * 0.001
    metas = {kind: records.decode_meta(t.head.meta) for kind, t in templates.items()}

    async def one(storage: rf.RedisStorage, i: int) -> str:
        kind = _kind(i)
        template = templates[kind]
        created = started + i * 0.001
        run_id = f"{int(created * 1000):012x}{i:012x}"
        meta = msgspec.structs.replace(metas[kind], id=run_id, created_at=created)
        await storage.create_run(run_id, reactor=template.head.reactor, status="paused",
                                 meta=records.encode(meta), state=template.head.state,
                                 created_at=created, owner=OWNER, lock_ttl=600.0)
        await storage.save_state(run_id, OWNER, status="paused", previous_status="paused",
                                 state=template.head.state, steps=template.steps, release=True)
        return run_id

    return one


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    storage, count = bulk_storage(ctx, "deploy-check")
    stored = await store_runs(storage, count, _copies(count, await _templates()))
    total = count + 3  # (the templates themselves)
    report.note(f"{total:,} paused runs stored in {stored.seconds:.1f} s "
                f"(untimed); {ctx.reps} repetitions")
    keys = RedisKeys(ctx.namespace(storage))
    client = redis.asyncio.Redis.from_url(server.url)

    async def floor() -> int:
        ids = await client.zrange(keys.by_status(flows.checkout.name, "paused"), 0, -1)
        read = 0
        for start in range(0, len(ids), BATCH):
            pipe = client.pipeline(transaction=False)
            for raw in ids[start:start + BATCH]:
                run_id = raw.decode()
                pipe.hmget(keys.run(run_id), HEAD_FIELDS)
                pipe.hgetall(keys.steps(run_id))
            read += len(await pipe.execute()) // 2
        return read

    naming.forget(flows.checkout_v1)  # the deploy: version 1's module is gone
    checks: list[float] = []
    floors: list[float] = []
    try:
        verdicts = await inventory.deploy_check()  # warm-up, and the figures checked
        tally = Counter(v.verdict for v in verdicts)
        if len(verdicts) != total or tally["stranded"] != count // 10 + 1:
            report.error(f"deploy_check said {dict(tally)} of {len(verdicts)} runs")
            return
        for _ in range(ctx.reps):
            settle()
            start = time.perf_counter()
            await inventory.deploy_check()
            checks.append(time.perf_counter() - start)
            settle()
            start = time.perf_counter()
            if await floor() != total:
                report.error("the hand-written read missed runs")
                return
            floors.append(time.perf_counter() - start)
    finally:
        naming.register(flows.checkout_v1)
        await client.aclose()
    check, base = Spread.of(checks), Spread.of(floors)
    report.note(f"verdicts: {tally['continues']:,} continues, {tally['migrates']:,} migrates, "
                f"{tally['stranded']:,} stranded")
    report.row(f"deploy-check of {total:,} runs", check, "s")
    report.row("deploy-check, runs per second", total / check.median, "runs/s")
    report.row("baseline: ZRANGE + pipelined HMGET+HGETALL", base, "s")
    report.row("baseline, runs per second", total / base.median, "runs/s")
    report.verdict(f"deploy-check of {total:,} in-flight runs <= {TARGET_S:g} s",
                   check.median <= TARGET_S,
                   f"{check.median:.2f} s ({total / check.median:,.0f} runs/s); hand-written "
                   f"read of the same keys {base.median:.2f} s "
                   f"({check.median / base.median:.1f}x)")
