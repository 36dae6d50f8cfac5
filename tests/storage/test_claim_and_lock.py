"""`Storage.claim_and_lock`: claim, lock, load in one call (what `continue_` does first), on
every backend; on Redis one command, retry-safe."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from reactorflow.storage.base import ClaimResult, Resumption, Storage
from reactorflow.storage.redis import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import redis_namespace
from tests.storage.test_contract import OTHER, OWNER, _commands_during, new_run

RESUMER = "resumer-1"


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


async def _paused(storage: Storage) -> str:
    """A paused run with a step, two events, and its lock released (as a pause leaves it)."""
    run_id = await new_run(storage, status="paused", events=[b"e1"])
    await storage.save_step(run_id, OWNER, "prep", b"rec", [b"e2"])
    assert await storage.release_lock(run_id, OWNER) == 0
    return run_id


async def test_claim_and_lock_claims_locks_and_loads(storage: Storage) -> None:
    run_id = await _paused(storage)
    outcome, stored = await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                   lock_ttl=10.0)
    assert outcome is ClaimResult.ACCEPTED
    assert stored is not None
    assert stored.head.status == "paused" and stored.head.reactor == "flow"
    assert stored.steps == {"prep": b"rec"}
    assert stored.history == [b"e1", b"e2"]
    assert stored.claims == {"approve": b"p"}
    assert await storage.lock_owner(run_id) == RESUMER
    assert await storage.release_lock(run_id, RESUMER) == 0


async def test_claim_and_lock_takes_no_lock_for_a_claim_not_accepted(storage: Storage) -> None:
    run_id = await _paused(storage)
    assert await storage.claim(run_id, "approve", b"first") is ClaimResult.ACCEPTED
    assert await storage.claim_and_lock(run_id, "approve", b"second", owner=RESUMER,
                                        lock_ttl=10.0) == (ClaimResult.TAKEN, None)
    done = await new_run(storage, status="completed")
    assert await storage.claim_and_lock(done, "approve", b"p", owner=RESUMER,
                                        lock_ttl=10.0) == (ClaimResult.NOT_RESUMABLE, None)
    assert await storage.claim_and_lock("no-such-run", "approve", b"p", owner=RESUMER,
                                        lock_ttl=10.0) == (ClaimResult.NOT_RESUMABLE, None)
    assert await storage.lock_owner(run_id) is None
    assert await storage.claims(run_id) == {"approve": b"first"}


async def test_claim_and_lock_keeps_the_claim_when_another_owner_holds_the_run(
        storage: Storage) -> None:
    run_id = await _paused(storage)
    assert await storage.acquire_lock(run_id, OTHER, 10.0)
    assert await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                        lock_ttl=10.0) == (ClaimResult.ACCEPTED, None)
    assert await storage.claims(run_id) == {"approve": b"p"}  # the holder applies it
    assert await storage.lock_owner(run_id) == OTHER


async def test_redis_claim_and_lock_is_one_command(redis_url: str) -> None:
    redis_storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    run_id = await _paused(redis_storage)
    found: list[Any] = []

    async def resume() -> None:
        found.append(await redis_storage.claim_and_lock(run_id, "approve", b"p",
                                                        owner=RESUMER, lock_ttl=10.0))

    seen = await _commands_during(redis_url, resume)
    await redis_storage.aclose()
    assert [c["command"].split(" ", 1)[0] for c in seen if c["client_type"] != "lua"] == [
        "EVALSHA"]
    assert found[0][0] is ClaimResult.ACCEPTED and found[0][1] is not None


async def test_redis_claim_and_lock_replayed_claims_and_locks_once(redis_url: str) -> None:
    """What redis-py's retry after a lost reply amounts to: the same call sent twice."""
    redis_storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    run_id = await _paused(redis_storage)
    conn = await redis_storage._redis.get()
    keys = redis_storage._keys.run_keys(run_id)
    args: list[Any] = ["token-1", "approve", b"p", 60_000, RESUMER, 10_000, "", "", "", "", "",
                       100, run_id, 0]
    first = await conn.script("claim_lock_load", keys, args)
    again = await conn.script("claim_lock_load", keys, args)
    assert first[:2] == again[:2] == [b"accepted", 1]
    assert await redis_storage.release_lock(run_id, RESUMER) == 0  # counted once
    assert await redis_storage.claims(run_id) == {"approve": b"p"}
    await redis_storage.aclose()


def _resumption(expected: bytes = b"state-0", unclaimed: tuple[str, ...] = ()) -> Resumption:
    return Resumption("paused", expected, "running", b"state-1", [b"resumed"], unclaimed)


async def test_claim_and_lock_makes_the_resumption_when_the_run_is_as_expected(
        storage: Storage) -> None:
    run_id = await _paused(storage)
    outcome, stored = await storage.claim_and_lock(
        run_id, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
        then=_resumption(unclaimed=("other",)))
    assert outcome is ClaimResult.ACCEPTED and stored is not None
    assert (stored.head.status, stored.head.state) == ("running", b"state-1")
    assert stored.history == [b"e1", b"e2", b"resumed"]
    head = await storage.load_head(run_id)
    assert head is not None and (head.status, head.state) == ("running", b"state-1")
    running = await storage.list_runs("flow", "running", 10, None)
    assert [h.run_id for h in running.heads] == [run_id]
    assert (await storage.list_runs("flow", "paused", 10, None)).heads == []
    assert await storage.lock_owner(run_id) == RESUMER


@pytest.mark.parametrize("change", ["state", "claimed"])
async def test_claim_and_lock_skips_the_resumption_when_the_run_changed(
        storage: Storage, change: str) -> None:
    run_id = await _paused(storage)
    then = _resumption(expected=b"another state") if change == "state" else _resumption(
        unclaimed=("other",))
    if change == "claimed":
        assert await storage.claim(run_id, "other", b"q") is ClaimResult.ACCEPTED
    outcome, stored = await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                   lock_ttl=10.0, then=then)
    assert outcome is ClaimResult.ACCEPTED and stored is not None  # claimed and locked
    assert (stored.head.status, stored.head.state) == ("paused", b"state-0")  # nothing else
    assert stored.history == [b"e1", b"e2"]
    assert await storage.lock_owner(run_id) == RESUMER


async def test_redis_claim_and_lock_replayed_resumes_once(redis_url: str) -> None:
    redis_storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    run_id = await _paused(redis_storage)
    conn = await redis_storage._redis.get()
    keys = redis_storage._keys.run_keys(run_id)
    args: list[Any] = ["token-1", "approve", b"p", 60_000, RESUMER, 10_000, "running", "paused",
                       b"state-0", b"state-1", "1.0", 100, run_id, 0, b"resumed"]
    first = await conn.script("claim_lock_load", keys, args)
    again = await conn.script("claim_lock_load", keys, args)
    assert first[6] == 1 and again[6] == 0  # the retry recognised its write
    assert await redis_storage.history(run_id) == [b"e1", b"e2", b"resumed"]
    assert await redis_storage.release_lock(run_id, RESUMER) == 0
    await redis_storage.aclose()
