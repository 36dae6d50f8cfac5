"""`rf.list_runs` (what `reactorflow runs list` and the dashboard call) over 100,000 stored runs
on Redis: the first page across every reactor, the first page of one reactor and status, a
page deep in the list (from a cursor), and the dashboard's `GET /api/runs` (through the ASGI
app, JSON included), against the floor of the same reads done by hand (one
ZREVRANGE of one index plus one pipelined HMGET of the page's run heads) in the same run."""

from __future__ import annotations

import httpx
import redis.asyncio

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._report import Spread, time_each
from benchmarks._stored import bulk_storage, plain_runs, store_runs
from reactorflow.status import Status
from reactorflow.storage.redis.keys import HEAD_FIELDS, RedisKeys
from reactorflow.web import create_app

TITLE = "runs list (rf.list_runs) over 100,000 stored runs on Redis vs a hand-written read"
NEEDS_REDIS = True
TARGET_MS = 100.0
PAGE = 50
REACTORS = ("orders", "billing", "shipping", "emails")
STATUSES = (Status.COMPLETED, Status.COMPLETED, Status.FAILED, Status.PAUSED, Status.CANCELLED)


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    storage, count = bulk_storage(ctx, "runs-list")
    stored = await store_runs(storage, count, plain_runs(REACTORS, STATUSES, count))
    calls = ctx.pick(full=50, quick=10)
    report.note(f"{count:,} runs over {len(REACTORS)} reactors and {len(set(STATUSES))} "
                f"statuses stored in {stored.seconds:.1f} s (untimed); "
                f"{ctx.reps} repetitions x {calls} calls, pages of {PAGE}")
    keys = RedisKeys(ctx.namespace(storage))
    client = redis.asyncio.Redis.from_url(server.url)
    middle = await rf.list_runs(limit=1000)
    for _ in range(count // 2 // 1000 - 1):
        middle = await rf.list_runs(limit=1000, cursor=middle.next_cursor)
    deep = middle.next_cursor

    async def floor() -> None:
        ids = await client.zrevrange(keys.by_reactor(REACTORS[0]), 0, PAGE - 1)
        pipe = client.pipeline(transaction=False)
        for run_id in ids:
            pipe.hmget(keys.run(run_id.decode()), HEAD_FIELDS)
        await pipe.execute()

    transport = httpx.ASGITransport(app=create_app(token="bench"))
    http = httpx.AsyncClient(transport=transport, base_url="http://bench",
                             headers={"Authorization": "Bearer bench"})

    async def dashboard_page() -> None:
        response = await http.get("/api/runs", params={"limit": PAGE})
        if response.status_code != 200:
            raise RuntimeError(f"GET /api/runs answered {response.status_code}")

    subjects = {
        "rf.list_runs(limit=50): every reactor": lambda: rf.list_runs(limit=PAGE),
        "rf.list_runs(reactor=, status='failed', limit=50)":
            lambda: rf.list_runs(reactor=REACTORS[0], status="failed", limit=PAGE),
        f"rf.list_runs(cursor at run {count // 2:,})":
            lambda: rf.list_runs(limit=PAGE, cursor=deep),
        "dashboard: GET /api/runs?limit=50 (ASGI, JSON)": dashboard_page,
        "baseline: ZREVRANGE + pipelined HMGET x 50": floor,
    }
    try:
        first = await rf.list_runs(limit=PAGE)
        if len(first.runs) != PAGE or first.next_cursor is None:
            report.error(f"first page has {len(first.runs)} runs")
            return
        timings = await time_each(subjects, ctx.reps, calls)
    finally:
        await client.aclose()
        await http.aclose()
    ms = 1e3
    for name, values in timings.items():
        report.row(name, Spread.of(values).scaled(ms), "ms")
    worst = max(Spread.of(v).median for n, v in timings.items()
                if not n.startswith("baseline")) * ms
    floor_ms = Spread.of(timings["baseline: ZREVRANGE + pipelined HMGET x 50"]).median * ms
    report.verdict(f"first page <= {TARGET_MS:g} ms with {count:,} runs", worst <= TARGET_MS,
                   f"slowest page (rf.list_runs or the dashboard API) {worst:.2f} ms; "
                   "hand-written floor "
                   f"{floor_ms:.2f} ms")
