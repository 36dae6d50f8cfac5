"""Server-sent events: live updates of one run and of a page of the run list.

One run (`GET /api/runs/{id}/events`), in order: subscribe to the run's channel; read the run
and send it (event `run`); then wait for a notification or `POLL` seconds, whichever comes
first (step checkpoints are not notified, so the page re-reads to show steps live), re-read,
and send the run again only when it changed; stop after the run settled and was sent. The list
(`GET /api/events?reactor=&status=&limit=`) re-reads its first page every `LIST_POLL` seconds
and sends it (event `runs`) when it changed. A comment line every `KEEPALIVE` seconds keeps
proxies from closing an idle stream.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse

from reactorflow import config
from reactorflow.jsonforms import dumps, page_form
from reactorflow.runtime.ops import lookup, search
from reactorflow.web.api import page_limit, run_filter
from reactorflow.web.runview import run_view

POLL = 0.5
LIST_POLL = 1.0
KEEPALIVE = 15.0
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def frame(event: str, data: bytes) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


async def changes(event: str, first: bytes, settled: bool,
                  following: Callable[[], Awaitable[tuple[bytes, bool]]]) -> AsyncIterator[bytes]:
    """Frames of `event`: `first`, then each value `following()` returns that differs from the
    last one sent, until it reports the stream settled; a keep-alive comment when quiet."""
    last = first
    yield frame(event, first)
    quiet_since = time.monotonic()
    while not settled:
        data, settled = await following()
        if data != last:
            last = data
            quiet_since = time.monotonic()
            yield frame(event, data)
        elif time.monotonic() - quiet_since > KEEPALIVE:
            quiet_since = time.monotonic()
            yield b": keep-alive\n\n"


async def run_events(request: Request) -> StreamingResponse:
    run_id = request.path_params["run_id"]
    first = await lookup.get_run(run_id)  # 404 before the stream starts

    async def stream() -> AsyncIterator[bytes]:
        async with config.current_storage().subscribe(run_id) as subscription:

            async def following() -> tuple[bytes, bool]:
                await subscription.wait(POLL)
                run = await lookup.get_run(run_id)
                return dumps(await run_view(run)), run.status.is_terminal

            opening = dumps(await run_view(first))
            async for chunk in changes("run", opening, first.status.is_terminal, following):
                yield chunk

    return StreamingResponse(stream(), media_type="text/event-stream", headers=HEADERS)


async def list_events(request: Request) -> StreamingResponse:
    query = request.query_params
    wanted = run_filter(query)  # 400 now, as `GET /api/runs`
    limit = page_limit(query.get("limit"))
    search.check_page(limit)
    first = await search.find_runs(wanted, limit, None)

    async def following() -> tuple[bytes, bool]:
        await anyio.sleep(LIST_POLL)
        page = await search.find_runs(wanted, limit, None)
        return dumps(page_form(page)), False

    return StreamingResponse(changes("runs", dumps(page_form(first)), False, following),
                             media_type="text/event-stream", headers=HEADERS)
