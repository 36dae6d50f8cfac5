"""Redacted values never leave the process that runs the steps: the CLI (as a subprocess,
with and without the application's module) and the HTTP API (both backends) show `***`."""

from __future__ import annotations

import json

import httpx
import pytest

import reactorflow as rf
from reactorflow.web import create_app
from tests.operate.conftest import Shared, cli
from tests.operate.secret_flows import API_KEY, OTP, SECRETS, SEEN, accounts

HIDDEN = "***"
APP = ("--app", "tests.operate.secret_flows")


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


@pytest.mark.slow
async def test_the_cli_shows_redacted_values_masked(shared: Shared) -> None:
    paused = await accounts.run(user="ada", api_key=API_KEY)
    for app in ((), APP):  # without the module: masked by the marks stored with the run
        shown = cli(shared, "runs", "show", paused.id, "--json", *app)
        assert shown.code == 0, shown.err
        assert json.loads(shown.out)["inputs"] == {"user": "ada", "api_key": HIDDEN}
        human = cli(shared, "runs", "show", paused.id, *app)
        assert_no_secret(shown.out, shown.err, human.out, human.err)

    payload = json.dumps({"code": OTP, "ok": False})
    failed = cli(shared, "continue", paused.id, "confirm", "--payload", payload, *APP, "--json")
    assert failed.code == 0, failed.err
    run = json.loads(failed.out)
    assert run["status"] == "failed"
    # connect's whole result is secret, so "session-..." goes too
    assert run["error"]["message"] == f"ada refused code {HIDDEN} on {HIDDEN}"
    listed = cli(shared, "runs", "list", "--json")
    verbose = cli(shared, "runs", "show", paused.id, "-v")
    assert_no_secret(failed.out, failed.err, listed.out, listed.err, verbose.out, verbose.err)


async def test_the_http_api_never_sends_a_redacted_value(storage: rf.Storage) -> None:
    token = "tkn-redaction"
    transport = httpx.ASGITransport(app=create_app(token=token))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers={"Authorization": f"Bearer {token}"}) as http:
        SEEN.clear()
        paused = await accounts.run(user="ada", api_key=API_KEY)
        read = await http.get(f"/api/runs/{paused.id}")
        assert read.json()["inputs"] == {"user": "ada", "api_key": HIDDEN}
        failed = await http.post(f"/api/runs/{paused.id}/continue",
                                 json={"step": "confirm", "payload": {"code": OTP, "ok": False}})
        assert failed.status_code == 200 and failed.json()["status"] == "failed"
        assert SEEN == [("connect", API_KEY), ("confirm", OTP)]  # the steps got the real ones
        retried = await http.post(f"/api/runs/{paused.id}/retry")
        assert retried.status_code == 200, retried.text
        assert SEEN[-1] == ("connect", API_KEY)  # retried from the real stored inputs
        done = await http.post(f"/api/runs/{retried.json()['id']}/continue",
                               json={"step": "confirm", "payload": {"code": OTP}})
        assert done.json()["status"] == "completed" and done.json()["value"] == "done for ada"
        texts = [read.text, failed.text, retried.text, done.text,
                 (await http.get("/api/runs")).text,
                 (await http.get(f"/api/runs/{paused.id}")).text]
        async with http.stream("GET", f"/api/runs/{paused.id}/events") as events:
            texts.append("".join([chunk async for chunk in events.aiter_text()]))
        assert HIDDEN in texts[-1]
        assert_no_secret(*texts)
