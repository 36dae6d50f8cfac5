"""The retention rule of the storage contract (storage/contract/storage.py, api.md §13), on every
backend (memory, Redis, Redis Cluster): retention applies to ended runs only. A run that has not
ended (running, paused, rolling_back, aborted) keeps every part of it (head, steps, history, claims,
counters, control request, map element slots, correlation ids) however long it waits; the write that
ends it starts the retention of all of them; a write that makes it live again stops it.

Memory is checked on a fake clock moved far past the retention; Redis by reading each key's TTL
(PTTL), never by sleeping."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reactorflow import clock
from reactorflow.status import ENDED, Status
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ClaimResult, GateTake
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.testing import FakeClock
from tests.conftest import ALL_BACKENDS
from tests.helpers import redis_namespace
from tests.storage.test_contract import OWNER, new_run

RETENTION = 3600.0
"""Seconds (an hour): memory's fake clock jumps past it, Redis's TTLs are read."""
MAP = "each"
REACTOR = "flow"
LIVE = sorted(s.value for s in Status if s.value not in ENDED)


class Lifetimes:
    """How long the parts of a run live, read the way each backend allows: memory by moving
    its fake clock, Redis by the TTL of each of the run's keys."""

    def __init__(self, storage: Storage, fake: FakeClock | None) -> None:
        self.storage = storage
        self.fake = fake

    async def _redis_ttls(self, run_id: str, correlation: str | None) -> dict[str, int]:
        """PTTL (ms; -1 none) of every key of the run that exists, and of its correlation."""
        assert isinstance(self.storage, RedisStorage)
        keys = self.storage._keys
        client = (await self.storage._redis.get()).client
        names = [*keys.run_keys(run_id)[:7], keys.elements(run_id, MAP),
                 keys.elements(run_id, f"{MAP}#job"), keys.elements(run_id, f"{MAP}#started")]
        if correlation is not None:
            names.append(keys.correlation(REACTOR, correlation))
        found = {}
        for name in names:
            ttl = int(await client.pttl(name))
            if ttl != -2:  # -2: no such key
                found[name] = ttl
        return found

    async def assert_kept(self, run_id: str, *, correlation: str | None = None,
                          parts: int = 8) -> None:
        """Every part of the run lives on, however long nothing writes it."""
        if self.fake is None:
            ttls = await self._redis_ttls(run_id, correlation)
            assert len(ttls) == parts + (correlation is not None), ttls
            assert all(ttl == -1 for ttl in ttls.values()), ttls  # no TTL at all
            return
        await self.fake.advance(RETENTION * 1000)  # 41 days past any write
        await self._assert_present(run_id, correlation)

    async def assert_expires_in_retention(self, run_id: str, *, parts: int = 8) -> None:
        """Every part of the run expires `retention` after now (the write that ended it), at
        once."""
        if self.fake is None:
            ttls = await self._redis_ttls(run_id, None)
            assert len(ttls) == parts, ttls
            for name, ttl in ttls.items():  # (minus a loaded machine's minute at most)
                assert RETENTION * 1000 - 60_000 < ttl <= RETENTION * 1000, (name, ttl)
            return
        await self.fake.advance(RETENTION * 0.99)
        await self._assert_present(run_id, None)
        await self.fake.advance(RETENTION * 0.02)
        storage = self.storage
        assert await storage.load_run(run_id) is None
        assert await storage.history(run_id) == []
        assert await storage.claims(run_id) == {}
        assert await storage.count_elements(run_id, MAP) == 0
        assert run_id not in [h.run_id for h in
                              (await storage.list_runs(REACTOR, None, 10, None)).heads]

    async def _assert_present(self, run_id: str, correlation: str | None) -> None:
        storage = self.storage
        stored = await storage.load_run(run_id, history=True)
        assert stored is not None and stored.history
        assert stored.steps.get("a") == b"rec"
        assert await storage.load_elements(run_id, MAP, 0, 1) == [b"e0"]
        assert run_id in [h.run_id for h in
                          (await storage.list_runs(REACTOR, None, 10, None)).heads]
        if correlation is not None:
            assert await storage.resolve_correlation(REACTOR, correlation) == run_id


@pytest.fixture(params=ALL_BACKENDS)
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Storage, Lifetimes]]:
    """A storage with an hour's retention and the way to read its lifetimes."""
    if request.param == "memory":
        fake = FakeClock()
        previous = clock.use(fake)
        memory = MemoryStorage(retention=RETENTION)
        try:
            yield memory, Lifetimes(memory, fake)
        finally:
            clock.use(previous)
        return
    url = request.getfixturevalue("redis_cluster_url" if request.param == "cluster"
                                  else "redis_url")
    redis_storage = RedisStorage.from_url(url, namespace=redis_namespace("ret"),
                                          retention=RETENTION)
    try:
        yield redis_storage, Lifetimes(redis_storage, None)
    finally:
        await redis_storage.aclose()


async def _full_run(storage: Storage, status: str = "running") -> str:
    """A run with every part written: head, steps, history, claims, counters, control
    request, tokens, element slots."""
    run_id = await new_run(storage, reactor=REACTOR, events=[b"e"], lock_ttl=RETENTION * 2)
    await storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"])
    assert await storage.claim(run_id, "approve", b"p") is ClaimResult.ACCEPTED
    assert await storage.incr_counter(run_id, "n") == 1
    assert await storage.save_elements(run_id, MAP, {0: b"e0", 1: b"e1"}) is not None
    if status != "running":
        await storage.save_state(run_id, OWNER, status=status, previous_status="running",
                                 state=b"s")
    return run_id


@pytest.mark.parametrize("status", LIVE)
async def test_a_run_that_has_not_ended_never_expires(
        rig: tuple[Storage, Lifetimes], status: str) -> None:
    """Running (one long step), paused (at an interrupt or a gate), rolling back, aborted (its
    undo owed): nothing of it expires, its element slots and correlation ids neither."""
    storage, lifetimes = rig
    run_id = await _full_run(storage, status)
    assert await storage.map_correlation(REACTOR, "order-1", run_id) == run_id
    assert await storage.request_control(run_id, b"cancel") is True  # the ctl key too

    await lifetimes.assert_kept(run_id, correlation="order-1")


@pytest.mark.parametrize("status", sorted(ENDED))
async def test_the_write_that_ends_a_run_starts_the_retention_of_all_of_it(
        rig: tuple[Storage, Lifetimes], status: str) -> None:
    storage, lifetimes = rig
    run_id = await _full_run(storage)
    await storage.save_state(run_id, OWNER, status=status, previous_status="running",
                             state=b"s", events=[b"end"])
    await storage.refresh_elements(run_id, [MAP])  # as the engine does after that write

    await lifetimes.assert_expires_in_retention(run_id, parts=7)  # (no control request)


@pytest.mark.parametrize("status", sorted(ENDED))
async def test_a_crash_right_after_the_ending_write_leaves_no_slot_without_its_expiry(
        rig: tuple[Storage, Lifetimes], status: str) -> None:
    """The process dies between the write that ends the run and `refresh_elements`: the slots
    (an inline map's, a fanned-out map's job data) expire with the run all the same, since
    that write set their expiry itself."""
    storage, lifetimes = rig
    run_id = await _full_run(storage)
    settled = await storage.settle_element(run_id, MAP, 2, b"e2", control=f"{MAP}#job",
                                           advance=3)
    assert settled is not None and settled.written == 1
    started = await storage.start_element(f"{run_id}:{MAP}:3", "job", 60, run_id, [],
                                          starts=(f"{MAP}#started", 3), stop=(f"{MAP}#job", 1))
    assert started is not None and not started.refused
    await storage.save_state(run_id, OWNER, status=status, previous_status="running",
                             state=b"s", events=[b"end"])
    # (no refresh_elements: the crash)

    await lifetimes.assert_expires_in_retention(run_id, parts=9)  # job data, started marks


async def test_a_run_live_again_keeps_its_slots_without_a_refresh(
        rig: tuple[Storage, Lifetimes]) -> None:
    """A retried (or undone) ended run is live again: the write that says so removes its
    slots' expiry too, whether or not a refresh follows."""
    storage, lifetimes = rig
    run_id = await _full_run(storage, "failed")
    await storage.refresh_elements(run_id, [MAP])  # (the engine's, after the failing write)
    await storage.save_state(run_id, OWNER, status="rolling_back", previous_status="failed",
                             state=b"s2")
    # (no refresh_elements: the crash)

    await lifetimes.assert_kept(run_id, parts=7)


async def test_a_run_created_ended_expires_in_retention(rig: tuple[Storage, Lifetimes]) -> None:
    storage, lifetimes = rig
    run_id = await new_run(storage, reactor=REACTOR, status="completed", events=[b"e"])
    await storage.save_step(run_id, OWNER, "a", b"rec")  # keys created after: the run's expiry
    assert await storage.save_elements(run_id, MAP, {0: b"e0"}) is not None

    await lifetimes.assert_expires_in_retention(run_id, parts=5)  # run steps hist tok slots


async def test_a_migration_that_recreates_an_ended_runs_steps_keeps_its_expiry(
        rig: tuple[Storage, Lifetimes]) -> None:
    """`migrate_run` removes every step record (the steps hash goes) and writes another (a
    new hash): the new one takes the run's expiry, as every key a status-less write creates."""
    storage, lifetimes = rig
    run_id = await new_run(storage, reactor=REACTOR, status="completed", events=[b"e"],
                           meta=b"meta-v1", lock_ttl=RETENTION * 2)
    await storage.save_step(run_id, OWNER, "old", b"old-rec")
    assert await storage.save_elements(run_id, MAP, {0: b"e0"}) is not None
    assert await storage.migrate_run(run_id, OWNER, expected_meta=b"meta-v1", meta=b"meta-v2",
                                     state=b"s", steps={"a": b"rec"}, removed=["old"],
                                     events=[b"migrated"])

    await lifetimes.assert_expires_in_retention(run_id, parts=5)  # run steps hist tok slots


async def test_a_run_live_again_after_it_ended_never_expires(
        rig: tuple[Storage, Lifetimes]) -> None:
    """A failed run retried (or a completed one undone) is live again: the retention its end
    started is stopped, on every part, until it ends anew."""
    storage, lifetimes = rig
    run_id = await _full_run(storage, "failed")
    await storage.refresh_elements(run_id, [MAP])
    await storage.save_state(run_id, OWNER, status="rolling_back", previous_status="failed",
                             state=b"s2")
    await storage.refresh_elements(run_id, [MAP])

    await lifetimes.assert_kept(run_id, parts=7)


async def test_writes_that_store_no_status_neither_start_nor_extend_a_retention(
        rig: tuple[Storage, Lifetimes]) -> None:
    """On a live run the keys they create carry no TTL; on an ended one they take the run's
    expiry (a unit's late result, a counter): nothing outlives the run, nothing expires
    before it."""
    storage, lifetimes = rig
    live = await new_run(storage, reactor=REACTOR, events=[b"e"], lock_ttl=RETENTION * 2)
    await storage.save_step(live, OWNER, "a", b"rec")
    assert await storage.save_unit(live, "u", b"unit") is True
    assert await storage.claim(live, "approve", b"p") is ClaimResult.ACCEPTED
    assert await storage.incr_counter(live, "n") == 1
    assert await storage.save_elements(live, MAP, {0: b"e0", 1: b"e1"}) is not None
    await lifetimes.assert_kept(live, parts=7)


async def test_a_fanned_out_elements_slots_follow_the_run(
        rig: tuple[Storage, Lifetimes]) -> None:
    storage, lifetimes = rig
    run_id = await _full_run(storage, "paused")
    written = await storage.settle_element(run_id, MAP, 2, b"e2", control=f"{MAP}#job",
                                           advance=3)
    assert written is not None and written.written == 1

    await lifetimes.assert_kept(run_id, parts=8)  # with the map's job-data hash


# -- idempotency claims: as long as their run ------------------------------------------------

IDEM = "order-42"


async def _claimed_run(storage: Storage) -> str:
    """A run started as an idempotent start does: its lock, the claim, then the run."""
    run_id = f"run-{IDEM}-{id(storage)}"
    assert await storage.claim_idempotency(REACTOR, IDEM, run_id) == run_id
    assert await storage.create_run(run_id, reactor=REACTOR, status="running", meta=b"m",
                                    state=b"s", created_at=1.0, owner=OWNER,
                                    lock_ttl=RETENTION * 2, events=[b"e"],
                                    idempotency_key=IDEM) is True
    return run_id


async def _claim_ttl(storage: Storage) -> int:
    """PTTL (ms) of the idempotency claim's key (Redis): -1 none, -2 gone."""
    assert isinstance(storage, RedisStorage)
    client = (await storage._redis.get()).client
    return int(await client.pttl(storage._keys.idempotency(REACTOR, IDEM)))


async def _assert_claim_kept(storage: Storage, lifetimes: Lifetimes, run_id: str) -> None:
    """The claim names the run however long the run waits: a replayed start finds it."""
    if lifetimes.fake is None:
        assert await _claim_ttl(storage) == -1
    else:
        await lifetimes.fake.advance(RETENTION * 1000)  # 41 days
    assert await storage.claim_idempotency(REACTOR, IDEM, "a-duplicate") == run_id


async def _assert_claim_expires_in_retention(storage: Storage, lifetimes: Lifetimes,
                                             run_id: str) -> None:
    if lifetimes.fake is None:
        ttl = await _claim_ttl(storage)  # (minus a loaded machine's minute at most)
        assert RETENTION * 1000 - 60_000 < ttl <= RETENTION * 1000, ttl
        return
    await lifetimes.fake.advance(RETENTION * 0.99)
    assert await storage.claim_idempotency(REACTOR, IDEM, "a-later-start") == run_id
    await lifetimes.fake.advance(RETENTION * 0.02)
    assert await storage.claim_idempotency(REACTOR, IDEM, "a-later-start") == "a-later-start"


@pytest.mark.parametrize("status", LIVE)
async def test_an_idempotency_claim_lives_as_long_as_its_live_run(
        rig: tuple[Storage, Lifetimes], status: str) -> None:
    """The claim expired `retention` after it was taken: a start replayed with the same key
    after the run had been live (paused at an interrupt) that long created a duplicate run."""
    storage, lifetimes = rig
    run_id = await _claimed_run(storage)
    if status != "running":
        await storage.save_state(run_id, OWNER, status=status, previous_status="running",
                                 state=b"s2")
    await _assert_claim_kept(storage, lifetimes, run_id)


@pytest.mark.parametrize("status", sorted(ENDED))
async def test_an_idempotency_claim_expires_retention_after_its_run_ends(
        rig: tuple[Storage, Lifetimes], status: str) -> None:
    storage, lifetimes = rig
    run_id = await _claimed_run(storage)
    await storage.save_state(run_id, OWNER, status=status, previous_status="running",
                             state=b"s2", release=True)

    await _assert_claim_expires_in_retention(storage, lifetimes, run_id)


async def test_an_idempotency_claim_lives_again_with_its_run(
        rig: tuple[Storage, Lifetimes]) -> None:
    """An ended run retried is live again: its claim's expiry is removed with the run's."""
    storage, lifetimes = rig
    run_id = await _claimed_run(storage)
    await storage.save_state(run_id, OWNER, status="failed", previous_status="running",
                             state=b"s2")
    await storage.save_state(run_id, OWNER, status="rolling_back", previous_status="failed",
                             state=b"s3")

    await _assert_claim_kept(storage, lifetimes, run_id)


@pytest.mark.parametrize("backend", ["redis", "cluster"])
async def test_a_crash_after_the_ending_write_leaves_the_claim_to_the_record_pass(
        request: pytest.FixtureRequest, backend: str) -> None:
    """Redis keeps the claim in another slot than the run: the process dies after the write
    that ends the run, before the claim follows. The run's follow-up record stays, and the
    sweeper's record pass gives the claim the run's expiry."""
    url = request.getfixturevalue("redis_cluster_url" if backend == "cluster" else "redis_url")
    storage = RedisStorage.from_url(url, namespace=redis_namespace("ret"), retention=RETENTION)
    try:
        run_id = await _claimed_run(storage)
        follow = storage.follow_idempotency

        async def crashed(run_id: str, claim: str) -> None:
            """The writer died right after its script."""

        storage.follow_idempotency = crashed  # type: ignore[method-assign]
        await storage.save_state(run_id, OWNER, status="completed", previous_status="running",
                                 state=b"s2", release=True)
        assert await _claim_ttl(storage) == -1  # (the crash: no TTL yet)
        client = (await storage._redis.get()).client
        assert await client.hget(storage._keys.run(run_id), "iq") is not None

        storage.follow_idempotency = follow  # type: ignore[method-assign]
        for _ in range(100):  # a round of the record pass over this namespace
            await storage.scan_records(1000)
            if await client.hget(storage._keys.run(run_id), "iq") is None:
                break
        ttl = await _claim_ttl(storage)
        assert RETENTION * 1000 - 60_000 < ttl <= RETENTION * 1000, ttl
    finally:
        await storage.aclose()


# -- gates: what a waiting run holds in a gate's keys lasts as long as it waits ----------------

async def _gate_ttls(storage: Storage, names: list[str]) -> dict[str, int]:
    """PTTL (ms) of each of the gate keys `names` that exists (Redis)."""
    assert isinstance(storage, RedisStorage)
    client = (await storage._redis.get()).client
    found = {}
    for name in names:
        ttl = int(await client.pttl(name))
        if ttl != -2:
            found[name] = ttl
    return found


async def test_a_run_queued_behind_an_ordered_lock_keeps_its_place_however_long_it_waits(
        rig: tuple[Storage, Lifetimes]) -> None:
    """A run dispatched behind an ordered lock that no worker takes for days (or snoozing at
    it) keeps its place: the line has no TTL of its own while a ticket is in it (it had a
    day's), and is deleted once every place is finished."""
    storage, lifetimes = rig
    key = "customer-7"
    assert await storage.ordered_enter(key, "first") == 1
    assert await storage.ordered_enter(key, "second") == 2
    if lifetimes.fake is None:
        ttls = await _gate_ttls(storage, storage._line_keys(key))  # type: ignore[attr-defined]
        assert len(ttls) == 3 and all(ttl == -1 for ttl in ttls.values()), ttls  # (no `done`)
    else:
        await lifetimes.fake.advance(RETENTION * 1000)  # 41 days, far past a day
    # the second still waits behind the first (None: it had lost its place)
    assert await storage.ordered_turn(key, "second", RETENTION * 10_000) is False
    assert await storage.ordered_turn(key, "first", RETENTION * 10_000) is True
    assert await storage.ordered_leave(key, "first") is True
    assert await storage.ordered_turn(key, "second", RETENTION * 10_000) is True
    assert await storage.ordered_leave(key, "second") is True
    assert (await storage.ordered_peek(key)).turn is None  # drained: deleted


async def test_a_caller_queued_at_a_gate_keeps_its_place_for_its_whole_wait(
        rig: tuple[Storage, Lifetimes]) -> None:
    """A queued waiter's entries (queue, what it asks, the run it would create) live as long as
    it waits, longer than the retention too: only a holder's place has a lease."""
    storage, lifetimes = rig
    key = "payments"
    wait = RETENTION * 5
    assert await storage.gate_acquire(key, "holder", limit=1, ttl=RETENTION * 10) \
        is GateTake.ACQUIRED
    assert await storage.gate_acquire(key, "waiter", limit=1, ttl=60, queue_for=wait) \
        is GateTake.BUSY
    if lifetimes.fake is None:
        ttls = await _gate_ttls(storage, storage._holder_keys(key))  # type: ignore[attr-defined]
        assert len(ttls) == 3, ttls  # holders, queue, asks
        for ttl in ttls.values():  # (minus a loaded machine's minute at most)
            assert wait * 1000 - 60_000 < ttl, ttls
    else:
        await lifetimes.fake.advance(RETENTION * 2)
    assert await storage.gate_release(key, "holder") is True
    assert await storage.gate_acquire(key, "waiter", limit=1, ttl=60) is GateTake.HELD


# -- the Redis scripts carry the same list of ended statuses as the Python code -----------------

def _lua_ended() -> set[str]:
    source = (Path(__file__).parents[2] / "reactorflow" / "storage" / "redis" / "scripts" / "lib"
              / "expiry.lua").read_text()
    line = next(ln for ln in source.splitlines() if ln.startswith("local ENDED = {"))
    return {part.split("=")[0].strip() for part in line.split("{", 1)[1].rstrip("}").split(",")}


def test_the_scripts_ended_statuses_are_the_contracts() -> None:
    assert _lua_ended() == set(ENDED)
    assert set(ENDED) == {s.value for s in Status if s.is_ended}
    assert "aborted" not in ENDED  # terminal, but its undo is still owed
