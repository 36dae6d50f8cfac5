"""Finding a run (api.md §16 Search): `rf.list_runs` and `reactor.list_runs` by creation time,
correlation id, idempotency key, version and error type, on both backends; the same filters in
the HTTP API (400 on a bad one) and the CLI."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import msgspec
import pytest

import reactorflow as rf
from reactorflow.web import create_app
from tests.helpers import redeploy, unique
from tests.operate.conftest import Shared, cli


class Order(msgspec.Struct):
    order_id: str
    fail: bool = False


def _shop(name: str, version: int = 1) -> rf.Reactor:
    flow = rf.Reactor(name, inputs=Order, version=version)

    @flow.step
    async def reserve(order_id: str, fail: bool) -> str:
        if fail:
            raise LookupError(f"no stock for {order_id}")
        return order_id

    @flow.interrupt(correlation_id="order:{reserve}")
    async def approve(payload: bool, reserve: str) -> bool:
        return payload

    return flow


def _ids(page: rf.RunPage) -> list[str]:
    return [run.id for run in page.runs]


async def test_a_correlation_id_or_an_idempotency_key_finds_its_run(
        storage: rf.Storage) -> None:
    shop = _shop(unique("search.shop"))
    o10 = await shop.run(order_id="O10", idempotency_key="checkout-O10")
    o11 = await shop.run(order_id="O11", idempotency_key="checkout-O11")
    assert _ids(await rf.list_runs(correlation_id="order:O10")) == [o10.id]
    assert _ids(await shop.list_runs(correlation_id="order:O11")) == [o11.id]
    assert _ids(await rf.list_runs(idempotency_key="checkout-O11")) == [o11.id]
    assert _ids(await rf.list_runs(correlation_id="order:O10",
                                   idempotency_key="checkout-O11")) == []  # both must match
    assert _ids(await rf.list_runs(correlation_id="order:O10", status="failed")) == []
    assert _ids(await rf.list_runs(correlation_id="order:nobody")) == []
    done = await shop.continue_(o10.id, step="approve", payload=True)
    assert done.status is rf.Status.COMPLETED
    # an ended run released its correlation id, and is still found by it while it is kept;
    # its idempotency key lives as long as it does
    assert _ids(await rf.list_runs(correlation_id="order:O10")) == [o10.id]
    assert _ids(await rf.list_runs(idempotency_key="checkout-O10")) == [o10.id]
    again = await shop.run(order_id="O10")  # a new run takes the id: the live one is found
    assert _ids(await rf.list_runs(correlation_id="order:O10")) == [again.id]
    await shop.continue_(again.id, step="approve", payload=True)
    assert _ids(await rf.list_runs(correlation_id="order:O10")) == [again.id]  # the latest


async def test_since_until_version_and_error_type_filter_the_list(storage: rf.Storage) -> None:
    name = unique("search.versions")
    old = _shop(name)
    first = await old.run(order_id="A")
    failed = await old.run(order_id="B", fail=True)
    redeploy(old)
    new = _shop(name, version=2)
    second = await new.run(order_id="C")
    assert _ids(await rf.list_runs(reactor=name, version=2)) == [second.id]
    assert _ids(await new.list_runs(version=1)) == [failed.id, first.id]
    assert _ids(await rf.list_runs(reactor=name, error_type="LookupError")) == [failed.id]
    assert _ids(await rf.list_runs(reactor=name, error_type="ValueError")) == []

    created = [datetime.fromtimestamp(r.created_at, UTC)
               for r in (await rf.list_runs(reactor=name)).runs]  # newest first
    assert _ids(await rf.list_runs(reactor=name, since=created[1])) == [second.id, failed.id]
    assert _ids(await rf.list_runs(reactor=name, until=created[1])) == [first.id]
    assert _ids(await rf.list_runs(reactor=name, since=created[2],
                                   until=created[0])) == [failed.id, first.id]


@pytest.mark.parametrize(("options", "named"), [
    ({"since": datetime(2026, 1, 1)}, "since=datetime.datetime(2026, 1, 1, 0, 0)): a naive"),
    ({"until": "2026-01-01"}, "until='2026-01-01'): give an aware datetime"),
    ({"since": datetime(2026, 2, 1, tzinfo=UTC),
      "until": datetime(2026, 1, 1, tzinfo=UTC)}, "until=datetime"),
    ({"version": 0}, "version=0): give a version number"),
    ({"correlation_id": ""}, "correlation_id=''): give a non-empty string"),
    ({"error_type": 3}, "error_type=3"),
])
async def test_a_bad_filter_is_refused_naming_it(storage: rf.Storage, options: dict[str, object],
                                                 named: str) -> None:
    with pytest.raises(rf.ReactorflowError, match="list_runs") as refused:
        await rf.list_runs(**options)  # type: ignore[arg-type]
    assert named in refused.value.message


@pytest.fixture
async def client(storage: rf.Storage) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


async def test_the_api_filters_and_answers_400_to_a_bad_filter(
        client: httpx.AsyncClient) -> None:
    shop = _shop(unique("search.api"))
    o1 = await shop.run(order_id="O1", idempotency_key="k-O1")
    failed = await shop.run(order_id="O2", fail=True)
    runs = await client.get("/api/runs", params={"correlation_id": "order:O1"})
    assert [r["id"] for r in runs.json()["runs"]] == [o1.id]
    runs = await client.get("/api/runs", params={"idempotency_key": "k-O1", "since": "1h"})
    assert [r["id"] for r in runs.json()["runs"]] == [o1.id]
    runs = await client.get("/api/runs", params={"reactor": shop.name, "version": "1",
                                                 "error_type": "LookupError"})
    assert [r["id"] for r in runs.json()["runs"]] == [failed.id]
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    runs = await client.get("/api/runs", params={"reactor": shop.name, "since": later})
    assert runs.json()["runs"] == []
    for query, named in [({"since": "yesterday"}, "since='yesterday': not a time"),
                         ({"until": "2026-01-01T10:00"}, "without a time zone"),
                         ({"version": "two"}, "version='two'"),
                         ({"status": "stuck"}, "status='stuck'")]:
        refused = await client.get("/api/runs", params=query)
        assert refused.status_code == 400, refused.text
        body = refused.json()
        assert body["error"] == "BadFilter" and named in body["message"], body


def test_since_takes_a_duration_back_or_an_iso_datetime_with_a_zone() -> None:
    from reactorflow.runtime.ops.search import parse_moment

    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    assert parse_moment("--since", "2h", now) == now - timedelta(hours=2)
    assert parse_moment("--since", "30m", now) == now - timedelta(minutes=30)
    assert parse_moment("--since", "7d", now) == now - timedelta(days=7)
    assert parse_moment("--since", "2026-04-30T10:00:00Z", now) == datetime(
        2026, 4, 30, 10, tzinfo=UTC)
    assert parse_moment("--until", "2026-04-30T10:00:00+02:00", now) == datetime(
        2026, 4, 30, 8, tzinfo=UTC)
    for text in ("2 hours", "h2", "-2h", "2026-04-30T10:00", ""):
        with pytest.raises(rf.ReactorflowError, match="--since="):
            parse_moment("--since", text, now)


@pytest.mark.slow
async def test_the_cli_lists_by_the_same_filters(shared: Shared) -> None:
    shop = _shop(unique("search.cli"))
    o7 = await shop.run(order_id="O7", idempotency_key="k-O7")
    await shop.run(order_id="O8")
    listed = cli(shared, "runs", "list", "--correlation-id", "order:O7", "--since", "2h",
                 "--json")
    assert listed.code == 0, listed.err
    assert [r["id"] for r in json.loads(listed.out)["runs"]] == [o7.id]
    keyed = cli(shared, "runs", "list", "--idempotency-key", "k-O7", "--version", "1",
                "--until", (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
                "--json")
    assert [r["id"] for r in json.loads(keyed.out)["runs"]] == [o7.id]
    bad = cli(shared, "runs", "list", "--since", "yesterday")
    assert bad.code == 2 and "Traceback" not in bad.err
    assert "Invalid value for '--since': --since='yesterday': not a time" in bad.err, bad.err
