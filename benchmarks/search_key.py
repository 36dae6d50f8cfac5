"""A search by correlation id (and by idempotency key) over 100,000 stored runs on Redis:
`rf.list_runs(correlation_id=...)` (what the dashboard's search box and `reactorflow runs list
--correlation-id` call) and the dashboard's `GET /api/runs?correlation_id=...`, against the
floor of the same read done by hand in the same run (one GET of the mapping key plus one HMGET
of the run's head). The cost must not grow with the number of stored runs (no scan)."""

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

TITLE = "search by correlation id over 100,000 stored runs on Redis vs a bare GET + HMGET"
NEEDS_REDIS = True
TARGET_MS = 10.0
REACTORS = ("orders", "billing", "shipping", "emails")
STATUSES = (Status.PAUSED, Status.COMPLETED, Status.FAILED)


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    storage, count = bulk_storage(ctx, "search-key")
    stored = await store_runs(storage, count, plain_runs(REACTORS, STATUSES, count))
    ids = stored.ids
    calls = ctx.pick(full=200, quick=20)
    target = ids[count // 2]
    reactor = REACTORS[(count // 2) % len(REACTORS)]
    for i in range(0, count, 100):  # every 100th run waits with a correlation id (untimed)
        await storage.map_correlation(REACTORS[i % len(REACTORS)], f"order:O{i}", ids[i])
    await storage.map_correlation(reactor, "order:target", target)
    await storage.claim_idempotency(reactor, "checkout:target", target)
    report.note(f"{count:,} runs over {len(REACTORS)} reactors stored in "
                f"{stored.seconds:.1f} s (untimed), {count // 100:,} correlation "
                f"ids; {ctx.reps} repetitions x {calls} calls")
    keys = RedisKeys(ctx.namespace(storage))
    client = redis.asyncio.Redis.from_url(server.url)
    transport = httpx.ASGITransport(app=create_app(token="bench"))
    http = httpx.AsyncClient(transport=transport, base_url="http://bench",
                             headers={"Authorization": "Bearer bench"})

    async def by_correlation() -> None:
        page = await rf.list_runs(correlation_id="order:target")
        if [r.id for r in page.runs] != [target]:
            raise RuntimeError(f"the search found {[r.id for r in page.runs]}, not {target}")

    async def by_key_of_one_reactor() -> None:
        await rf.list_runs(reactor=reactor, idempotency_key="checkout:target")

    async def dashboard() -> None:
        response = await http.get("/api/runs", params={"correlation_id": "order:target"})
        if response.status_code != 200 or len(response.json()["runs"]) != 1:
            raise RuntimeError(f"GET /api/runs answered {response.status_code}")

    async def floor() -> None:
        found = await client.get(keys.correlation(reactor, "order:target"))
        await client.hmget(keys.run(found.decode()), HEAD_FIELDS)

    subjects = {
        "rf.list_runs(correlation_id=): every reactor": by_correlation,
        "rf.list_runs(reactor=, idempotency_key=)": by_key_of_one_reactor,
        "dashboard: GET /api/runs?correlation_id= (ASGI, JSON)": dashboard,
        "baseline: GET of the mapping + HMGET of the head": floor,
    }
    try:
        timings = await time_each(subjects, ctx.reps, calls)
    finally:
        await client.aclose()
        await http.aclose()
    ms = 1e3
    for name, values in timings.items():
        report.row(name, Spread.of(values).scaled(ms), "ms")
    search_ms = Spread.of(timings["rf.list_runs(correlation_id=): every reactor"]).median * ms
    floor_ms = Spread.of(timings["baseline: GET of the mapping + HMGET of the head"]).median * ms
    report.verdict(f"search by correlation id <= {TARGET_MS:g} ms with {count:,} runs",
                   search_ms <= TARGET_MS,
                   f"rf.list_runs(correlation_id=) {search_ms:.2f} ms; bare GET + HMGET "
                   f"{floor_ms:.2f} ms")
