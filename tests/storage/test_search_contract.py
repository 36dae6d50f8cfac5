"""The storage contract for finding runs: a created-at range of `list_runs`, and `find_by_key`
(correlation ids and idempotency keys read from their first-wins mappings, never a scan)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest

from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import RunKey
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.storage.test_contract import _commands_during, new_run


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


async def test_list_runs_reads_a_created_at_range_since_inclusive_until_exclusive(
        storage: Storage) -> None:
    reactor = f"range-{uuid.uuid4().hex[:8]}"
    base = time.time() - 1000
    made = {at: await new_run(storage, reactor=reactor, created_at=base + at)
            for at in (0, 10, 20, 30, 40)}
    page = await storage.list_runs(reactor, None, 50, None, since=base + 10, until=base + 40)
    assert [h.run_id for h in page.heads] == [made[30], made[20], made[10]]
    # pages of one: the range holds across cursors, and of every reactor too
    seen, cursor = [], None
    while True:
        page = await storage.list_runs(None, "running", 1, cursor, since=base + 10,
                                       until=base + 40)
        seen += [h.run_id for h in page.heads]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [r for r in seen if r in made.values()] == [made[30], made[20], made[10]]
    assert (await storage.list_runs(reactor, None, 50, None, since=base + 41)).heads == []


async def test_find_by_key_reads_the_first_wins_mappings_of_each_reactor(
        storage: Storage) -> None:
    one, two = (f"keys-{uuid.uuid4().hex[:8]}" for _ in range(2))
    a = await new_run(storage, reactor=one)
    b = await new_run(storage, reactor=two)
    key = f"order-{uuid.uuid4().hex[:8]}"
    assert await storage.map_correlation(one, key, a) == a
    assert await storage.claim_idempotency(two, key, b) == b
    found = await storage.find_by_key(RunKey.CORRELATION_ID, key, None)
    assert {r: found[r] for r in found if r in (one, two)} == {one: a}
    assert await storage.find_by_key(RunKey.CORRELATION_ID, key, two) == {}
    assert await storage.find_by_key(RunKey.IDEMPOTENCY_KEY, key, two) == {two: b}
    assert await storage.find_by_key(RunKey.IDEMPOTENCY_KEY, "nobody", None) == {}
    await storage.release_correlation(one, key, a)
    assert await storage.find_by_key(RunKey.CORRELATION_ID, key, one) == {}


async def test_redis_a_lookup_by_key_sends_the_same_commands_however_many_runs_are_stored(
        redis_url: str) -> None:
    storage = RedisStorage.from_url(redis_url, namespace=f"search-{uuid.uuid4().hex[:8]}")
    try:
        reactor = "orders"
        target = await new_run(storage, reactor=reactor)
        await storage.map_correlation(reactor, "O10", target)

        async def lookup() -> None:
            assert await storage.find_by_key(RunKey.CORRELATION_ID, "O10", None) == {
                reactor: target}

        await lookup()  # connected before the window opens
        few = [c["command"] for c in await _commands_during(redis_url, lookup)]
        for i in range(300):
            run_id = await new_run(storage, reactor=reactor)
            await storage.map_correlation(reactor, f"O{i}-other", run_id)
        many = [c["command"] for c in await _commands_during(redis_url, lookup)]
        # SMEMBERS of the reactors, then per reactor a GET of the live mapping and one of the
        # ended run's record (`remember_correlation`), in one pipeline
        assert len(many) == len(few) == 3, many
        assert many[0].upper().startswith("SMEMBERS")
        assert all(c.upper().startswith("GET") for c in many[1:])
        assert not any(c.upper().startswith(("SCAN", "KEYS", "ZRANGE", "ZREVRANGE", "HSCAN"))
                       for c in many)
    finally:
        await storage.aclose()


async def test_an_ended_run_is_found_by_its_correlation_id_until_it_expires(
        storage: Storage) -> None:
    reactor = f"past-{uuid.uuid4().hex[:8]}"
    ended = await new_run(storage, reactor=reactor)
    live = await new_run(storage, reactor=reactor)
    await storage.remember_correlation(reactor, "order:O1", live)  # not ended: nothing kept
    assert await storage.find_by_key(RunKey.CORRELATION_ID, "order:O1", reactor) == {}
    await storage.save_state(ended, "owner-1", status="completed", previous_status="running",
                             state=b"s")
    await storage.remember_correlation(reactor, "order:O1", ended)
    assert await storage.find_by_key(RunKey.CORRELATION_ID, "order:O1", None) == {
        reactor: ended}
    assert await storage.map_correlation(reactor, "order:O1", live) == live  # no first-wins
    assert await storage.find_by_key(RunKey.CORRELATION_ID, "order:O1", reactor) == {
        reactor: live}  # a live mapping wins
    assert await storage.release_correlation(reactor, "order:O1", live)
    assert await storage.find_by_key(RunKey.CORRELATION_ID, "order:O1", reactor) == {
        reactor: ended}
