"""`GET /metrics` (Prometheus text from prometheus-client, parsed back with its own parser) and
`GET /api/stats/hour` (the dashboard's chart of the last hour), from the real app over real
runs, on both backends; and /metrics without the `prometheus` extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import reactorflow as rf
from reactorflow.testing import Environment
from reactorflow.web import create_app
from tests.helpers import unique

TOKEN = "metrics-token-3"


def _flows() -> tuple[rf.Reactor, rf.Reactor]:
    good = rf.Reactor(unique("web-m-good"))
    bad = rf.Reactor(unique("web-m-bad"))

    @good.step
    async def one() -> int:
        return 1

    @bad.step
    async def boom() -> int:
        raise RuntimeError("no")

    return good, bad


@pytest.fixture
async def client(storage: rf.Storage) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


async def test_metrics_exposes_stored_runs_per_reactor_and_status(
        client: httpx.AsyncClient) -> None:
    good, bad = _flows()
    for _ in range(3):
        assert (await good.run()).ok
    assert (await bad.run()).status is rf.Status.FAILED

    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    runs = families["reactorflow_runs"]
    assert runs.type == "gauge"
    seen = {(s.labels["reactor"], s.labels["status"]): s.value for s in runs.samples}
    assert seen[(good.name, "completed")] == 3
    assert seen[(bad.name, "failed")] == 1
    assert (good.name, "failed") not in seen
    assert "process_cpu_seconds" in families or "python_info" in families  # default registry

    refused = await client.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert refused.status_code == 401


async def test_the_hour_chart_counts_runs_created_in_the_last_hour_by_status(
        storage: rf.Storage) -> None:
    good, bad = _flows()
    async with Environment(storage=storage) as env:
        assert (await good.run()).ok  # two hours before the others: not in the chart
        await env.clock.advance(2 * 3600)
        assert (await good.run()).ok
        await env.clock.advance(22 * 60)
        assert (await bad.run()).status is rf.Status.FAILED
        assert (await good.run()).ok
        transport = httpx.ASGITransport(app=create_app(token=TOKEN))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            refused = await client.get("/api/stats/hour")
            response = await client.get("/api/stats/hour",
                                        headers={"Authorization": f"Bearer {TOKEN}"})
            mine = await client.get(f"/api/stats/hour?reactor={bad.name}",
                                    headers={"Authorization": f"Bearer {TOKEN}"})
        now = env.clock.now()
    assert refused.status_code == 401
    stats = response.json()
    assert stats["until"] == pytest.approx(now) and stats["since"] == pytest.approx(now - 3600)
    assert stats["bucket_seconds"] == 300 and len(stats["buckets"]) == 12
    assert stats["total"] == 3 and stats["truncated"] is False
    filled = [(i, b["counts"]) for i, b in enumerate(stats["buckets"]) if b["counts"]]
    assert filled == [(7, {"completed": 1}), (11, {"completed": 1, "failed": 1})]
    assert mine.json()["total"] == 1


def test_without_the_prometheus_extra_metrics_is_a_404_naming_it() -> None:
    script = textwrap.dedent("""
        import sys
        sys.modules["prometheus_client"] = None  # as if the extra were not installed
        import anyio, httpx
        from reactorflow.web import create_app

        async def main():
            transport = httpx.ASGITransport(app=create_app())
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                response = await client.get("/metrics")
            print(response.status_code, response.text)

        anyio.run(main)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    code, body = done.stdout.strip().split(" ", 1)
    assert code == "404"
    assert "pip install 'reactorflow[prometheus]'" in body and "\n" not in body
