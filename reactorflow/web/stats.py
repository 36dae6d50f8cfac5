"""`GET /api/stats/hour`: runs per status over the last hour, in 5-minute buckets (the
dashboard's home chart).

Each run created in the last hour is counted in the bucket of its creation time, under its
status now. The runs are read newest first through `rf.list_runs` (the storage's indexes),
stopping at the first run older than the hour, and at `MAX_RUNS` at most (`truncated` then
says the oldest buckets are short).
"""

from __future__ import annotations

from starlette.requests import Request

from reactorflow import clock
from reactorflow.runtime.ops import lookup
from reactorflow.status import Status
from reactorflow.web.responses import JSON

HOUR = 3600.0
BUCKET = 300.0
PAGE = 1000
MAX_RUNS = 20_000


async def hour(request: Request) -> JSON:
    """`{"since", "until", "bucket_seconds", "statuses", "buckets": [{"start", "counts"}],
    "total", "truncated"}`; `?reactor=NAME` counts one reactor's runs only."""
    reactor = request.query_params.get("reactor") or None
    until = clock.now()
    since = until - HOUR
    slots = int(HOUR // BUCKET)
    counts: list[dict[str, int]] = [{} for _ in range(slots)]
    total, truncated, cursor = 0, False, None
    while True:
        page = await lookup.list_runs(reactor=reactor, limit=PAGE, cursor=cursor)
        older = False
        for run in page.runs:
            if run.created_at < since:
                older = True
                break
            slot = min(slots - 1, int((run.created_at - since) // BUCKET))
            bucket = counts[slot]
            bucket[run.status.value] = bucket.get(run.status.value, 0) + 1
            total += 1
        cursor = page.next_cursor
        if older or cursor is None:
            break
        if total >= MAX_RUNS:
            truncated = True
            break
    return JSON({"since": since, "until": until, "bucket_seconds": BUCKET,
                 "statuses": [status.value for status in Status],
                 "buckets": [{"start": since + i * BUCKET, "counts": bucket}
                             for i, bucket in enumerate(counts)],
                 "total": total, "truncated": truncated})
