"""Schedules in the HTTP API, on both backends: listed with their next fire time, paused and
resumed (mutations need the token)."""

from __future__ import annotations

import httpx

import reactorflow as rf
from reactorflow.web import create_app
from tests.schedules.conftest import Clock
from tests.schedules.flows import minutely

TOKEN = "s3cret-token"
KEY = "sched-minutely:every-minute"


async def test_schedules_are_listed_paused_and_resumed(storage: rf.Storage,
                                                       clock: Clock) -> None:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        listed = (await http.get("/api/schedules", headers=auth)).json()["schedules"]
        rows = {row["schedule"]: row for row in listed}
        assert rows[KEY]["next"] == "2026-01-01T00:01:00+00:00"  # the clock: 00:00:30
        assert rows[KEY]["paused"] is False and rows[KEY]["last_run"] == ""
        assert rows["sched-minutely:1"]["next"] == "2026-01-01T02:00:00+01:00"

        refused = await http.post(f"/api/schedules/{KEY}/pause")  # no token
        assert refused.status_code == 401
        paused = await http.post(f"/api/schedules/{KEY}/pause", headers=auth)
        assert paused.status_code == 200 and paused.json()["paused"] is True
        clock.advance(minutes=2)
        assert await rf.schedule_once(reactors=[minutely]) == []
        resumed = await http.post(f"/api/schedules/{KEY}/resume", headers=auth)
        assert resumed.json()["paused"] is False
        assert resumed.json()["next"] == "2026-01-01T00:03:00+00:00"
        unknown = await http.post("/api/schedules/nope/pause", headers=auth)
        assert unknown.status_code == 422 and "no schedule 'nope'" in unknown.json()["message"]
