"""`reactorflow runs why RUN_ID [--json]` (a subprocess against the suite's Redis) and
`GET /api/runs/{id}/why` (through an ASGI client, on both backends): what a run waits on, or
that it ended, or that it is moving (api.md §16)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime

import anyio
import httpx
import pytest

import reactorflow as rf
from reactorflow.cli.notes import moment_utc
from reactorflow.cli.why import nothing_line
from reactorflow.web import create_app
from tests.helpers import unique
from tests.operate.conftest import Shared, cli
from tests.operate.flows import orders, reminders

TOKEN = "why-token"


@pytest.mark.slow
async def test_runs_why_names_the_blocker_or_says_it_ended(shared: Shared) -> None:
    paused = await orders.run(item="tea")
    sleeping = await reminders.run(order_id="A1")
    failed = await orders.run(item="gin", fail=True)

    said = cli(shared, "runs", "why", paused.id)
    assert said.code == 0, said.err
    assert f"run {paused.id} (ops.orders, paused) waits on:" in said.out
    assert "interrupt" in said.out and "step 'approve'" in said.out
    assert "waiting for a payload for interrupt 'approve'" in said.out
    wake = sleeping.steps["cool_off"].wake_at
    assert wake is not None
    slept = cli(shared, "runs", "why", sleeping.id)
    assert f"until {moment_utc(wake)} (in 2 d 3 h)" in slept.out
    ended = cli(shared, "runs", "why", failed.id)
    assert "nothing: the run has ended (failed)" in ended.out

    listed = json.loads(cli(shared, "runs", "why", paused.id, "--json").out)
    assert [(b["kind"], b["step"]) for b in listed] == [("interrupt", "approve")]
    assert datetime.fromisoformat(listed[0]["since"]).tzinfo is not None
    assert json.loads(cli(shared, "runs", "why", failed.id, "--json").out) == []

    unknown = cli(shared, "runs", "why", "no-such-run")
    assert unknown.code == 1 and unknown.out == ""
    assert unknown.err.startswith("error: no run 'no-such-run'")


@pytest.fixture
async def client(storage: rf.Storage) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        yield http


async def test_the_api_lists_the_blockers_of_a_run(client: httpx.AsyncClient) -> None:
    paused = await orders.run(item="tea")
    reply = await client.get(f"/api/runs/{paused.id}/why")
    assert reply.status_code == 200, reply.text
    [blocker] = reply.json()
    assert (blocker["kind"], blocker["step"]) == ("interrupt", "approve")
    assert datetime.fromisoformat(blocker["since"]).tzinfo is not None
    assert "until" not in blocker  # only a payload moves it
    done = await orders.run(item="gin", fail=True)
    assert (await client.get(f"/api/runs/{done.id}/why")).json() == []
    missing = await client.get("/api/runs/no-such-run/why")
    assert missing.status_code == 404 and missing.json()["error"] == "RunNotFound"
    anonymous = await client.get(f"/api/runs/{paused.id}/why", headers={"Authorization": ""})
    assert anonymous.status_code == 401


async def test_a_moving_run_says_which_step_is_in_flight(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("why_moving"))
    entered, release = anyio.Event(), anyio.Event()

    @flow.step
    async def crunch() -> int:
        entered.set()
        await release.wait()
        return 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        await entered.wait()
        run = await rf.get_run((await rf.list_runs(reactor=flow.name)).runs[0].id)
        assert await rf.explain(run.id) == []
        line = nothing_line(run, run.updated_at)
        assert line.startswith("nothing: the run is moving (running; 0 of 1 steps done; "
                               "last change "), line
        release.set()
