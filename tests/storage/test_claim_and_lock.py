"""`Storage.claim_and_lock`: (check,) claim, lock, load in one call (what `continue_` does
first), on every backend; on Redis one command, retry-safe."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest

from reactorflow import records
from reactorflow.records import RollbackFailure, RunError, RunState
from reactorflow.status import Status
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ClaimResult, ResumeCheck, Resumption
from reactorflow.storage.redis.storage import RedisStorage
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
    args: list[Any] = ["token-1", "approve", b"p", 60_000, RESUMER, 10_000, "1.0", 100, run_id,
                       ""]
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
    args: list[Any] = ["token-1", "approve", b"p", 60_000, RESUMER, 10_000, "1.0", 100, run_id,
                       "then", "running", "paused", b"state-0", b"state-1", 0, 1, b"resumed"]
    first = await conn.script("claim_lock_load", keys, args)
    again = await conn.script("claim_lock_load", keys, args)
    assert first[6] == 1 and again[6] == 0  # the retry recognised its write
    assert await redis_storage.history(run_id) == [b"e1", b"e2", b"resumed"]
    assert await redis_storage.release_lock(run_id, RESUMER) == 0
    await redis_storage.aclose()


# -- with a ResumeCheck: the checks before the claim, and the `running` write built by storage

MARKER = records.fingerprint_marker({"prep": ["step"], "approve": ["interrupt", "prep"]})
META = b"meta-head" + MARKER + b"meta-tail"


def _state(**changes: Any) -> RunState:
    fields: dict[str, Any] = dict(
        status=Status.PAUSED, updated_at=1_000.0, waiting_on=["approve", "other"],
        deadlines={"approve": 5_000.0, "other": 4_000.5}, timeout_at=4_000.5,
        gate_waits={"s": "lock 'k'"}, gate_snoozes=2,
        error=RunError("s", "Boom", "it broke", "tb", [RollbackFailure("u", "undo", "m")]))
    fields.update(changes)
    return RunState(**fields)


async def _waiting(storage: Storage, state: RunState | bytes | None = None, *,
                   status: str = "paused", meta: bytes = META, reactor: str = "flow") -> str:
    """A run paused at `approve` (and `other`), its state in the runtime's encoding."""
    encoded = state if isinstance(state, bytes) else records.encode(state or _state())
    run_id = await new_run(storage, status=status, meta=meta, state=encoded, events=[b"e1"],
                           reactor=reactor)
    await storage.save_step(run_id, OWNER, "prep", b"rec", [b"e2"])
    assert await storage.release_lock(run_id, OWNER) == 0
    return run_id


def _check(now: float = 2_000.0, *, reactor: str = "flow", resume: bool = True) -> ResumeCheck:
    return ResumeCheck(reactor, MARKER, now, resume, [b"resumed"])


async def test_claim_and_lock_checks_then_claims_locks_and_resumes(storage: Storage) -> None:
    run_id = await _waiting(storage)
    outcome, stored = await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                   lock_ttl=10.0, check=_check())
    assert outcome is ClaimResult.ACCEPTED and stored is not None
    expected = _state(status=Status.RUNNING, updated_at=2_000.0, waiting_on=["other"])
    assert stored.head.status == "running"
    assert records.decode_state(stored.head.state) == expected  # as the runtime would write it
    assert stored.history == [b"e1", b"e2", b"resumed"]
    assert stored.claims == {"approve": b"p"} and stored.steps == {"prep": b"rec"}
    head = await storage.load_head(run_id)
    assert head is not None and head.status == "running" and head.state == stored.head.state
    running = await storage.list_runs("flow", "running", 10, None)
    assert [h.run_id for h in running.heads] == [run_id]
    assert (await storage.list_runs("flow", "paused", 10, None)).heads == []
    assert await storage.lock_owner(run_id) == RESUMER
    assert await storage.release_lock(run_id, RESUMER) == 0


async def test_claim_and_lock_check_resumes_the_last_waiting_interrupt(storage: Storage) -> None:
    run_id = await _waiting(storage, _state(waiting_on=["approve"], deadlines={}, timeout_at=None,
                                            gate_waits={}))
    outcome, stored = await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                   lock_ttl=10.0, check=_check())
    assert outcome is ClaimResult.ACCEPTED and stored is not None
    assert records.decode_state(stored.head.state) == _state(
        status=Status.RUNNING, updated_at=2_000.0, waiting_on=[], deadlines={},
        timeout_at=None, gate_waits={})


@pytest.mark.parametrize("why", ["other claimed", "no resume", "running"])
async def test_claim_and_lock_check_passes_without_the_write(storage: Storage, why: str) -> None:
    """Claimed and locked, nothing else written: another waiting interrupt has a claim (the
    owner applies both), the caller asked for no write (gates first), or the run is running."""
    run_id = await _waiting(storage, status="running" if why == "running" else "paused")
    if why == "other claimed":
        assert await storage.claim(run_id, "other", b"q") is ClaimResult.ACCEPTED
    before = await storage.load_head(run_id)
    outcome, stored = await storage.claim_and_lock(
        run_id, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
        check=_check(resume=why != "no resume"))
    assert outcome is ClaimResult.ACCEPTED and stored is not None and before is not None
    assert (stored.head.status, stored.head.state) == (before.status, before.state)
    assert stored.history == [b"e1", b"e2"]
    assert await storage.lock_owner(run_id) == RESUMER


@pytest.mark.parametrize("why", ["reactor", "status", "graph", "not waiting", "expired",
                                 "undecodable"])
async def test_claim_and_lock_check_refused_writes_nothing(storage: Storage, why: str) -> None:
    state: RunState | bytes | None = (_state(waiting_on=["other"]) if why == "not waiting"
                                      else b"\xc1 not msgpack" if why == "undecodable" else None)
    run_id = await _waiting(storage, state, status="completed" if why == "status" else "paused",
                            meta=b"meta of another graph" if why == "graph" else META)
    before = await storage.load_run(run_id, history=True, claims=True)
    check = _check(5_000.0 if why == "expired" else 2_000.0,
                   reactor="another" if why == "reactor" else "flow")
    outcome, stored = await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                   lock_ttl=10.0, check=check)
    assert outcome is ClaimResult.REFUSED and stored is not None and before is not None
    assert stored.head == before.head  # as storage saw it, to say why
    assert await storage.load_run(run_id, history=True, claims=True) == before
    assert await storage.lock_owner(run_id) is None


async def test_claim_and_lock_check_of_a_missing_run_is_refused(storage: Storage) -> None:
    assert await storage.claim_and_lock("no-such-run", "approve", b"p", owner=RESUMER,
                                        lock_ttl=10.0, check=_check()) == (ClaimResult.REFUSED,
                                                                           None)


async def test_claim_and_lock_check_then_a_claim_taken(storage: Storage) -> None:
    run_id = await _waiting(storage)
    assert await storage.claim(run_id, "approve", b"first") is ClaimResult.ACCEPTED
    assert await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
                                        check=_check()) == (ClaimResult.TAKEN, None)
    assert await storage.lock_owner(run_id) is None


async def test_redis_claim_and_lock_check_is_one_command_from_a_fresh_process(
        redis_url: str) -> None:
    """Checked, claimed, locked, written `running` with its index moves, and read: one
    EVALSHA, also from a storage that never saw the run (it names the reactor)."""
    namespace = redis_namespace()
    creator = RedisStorage.from_url(redis_url, namespace=namespace)
    run_id = await _waiting(creator)
    await creator.aclose()
    redis_storage = RedisStorage.from_url(redis_url, namespace=namespace)
    assert await redis_storage.lock_owner(run_id) is None  # (connected before the window)
    found: list[Any] = []

    async def resume() -> None:
        found.append(await redis_storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                        lock_ttl=10.0, check=_check()))

    seen = await _commands_during(redis_url, resume)
    assert [c["command"].split(" ", 1)[0] for c in seen if c["client_type"] != "lua"] == [
        "EVALSHA"]
    assert found[0][0] is ClaimResult.ACCEPTED and found[0][1].head.status == "running"
    running = await redis_storage.list_runs("flow", "running", 10, None)
    assert [h.run_id for h in running.heads] == [run_id]
    await redis_storage.aclose()


async def test_redis_claim_and_lock_check_replayed_answers_as_the_first(redis_url: str) -> None:
    """A retry after a lost reply skips the checks (the run is `running` by then) and answers
    as the first call did, writing nothing again."""
    redis_storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    run_id = await _waiting(redis_storage)
    conn = await redis_storage._redis.get()
    keys = redis_storage._keys.run_keys(run_id)
    args: list[Any] = ["token-1", "approve", b"p", 60_000, RESUMER, 10_000, "1.0", 100, run_id,
                       "check", "flow", MARKER, 2_000.0, "1", "", 1, b"resumed"]
    first = await conn.script("claim_lock_load", keys, args)
    again = await conn.script("claim_lock_load", keys, args)
    assert first[:2] == again[:2] == [b"accepted", 1]
    assert first[6] == 1 and again[6] == 0
    assert await redis_storage.history(run_id) == [b"e1", b"e2", b"resumed"]
    assert await redis_storage.release_lock(run_id, RESUMER) == 0  # counted once
    await redis_storage.aclose()


async def test_redis_claim_and_lock_check_path_reads_the_run_hash_once(redis_url: str) -> None:
    """On the check path the script reads the run's hash once (its expiry horizon with what
    the check needs) and writes it once: the check, the claim, the status write and the reply
    reuse what it read (no HGET of the status or of the creation time, no HMGET of the head
    after the write); the head it returns is the run's head as stored."""
    redis_storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    run_id = await _waiting(redis_storage)
    found: list[Any] = []

    async def claim() -> None:
        found.append(await redis_storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                        lock_ttl=10.0, check=_check()))

    seen = await _commands_during(redis_url, claim)
    run_key = redis_storage._keys.run(run_id)
    on_run = [c["command"].split(" ")[0] for c in seen
              if c["client_type"] == "lua" and c["command"].split(" ")[1:2] == [run_key]]
    outcome, stored = found[0]
    assert outcome is ClaimResult.ACCEPTED and stored is not None
    assert stored.head.status == "running"
    assert on_run == ["HMGET", "HSET"], on_run
    assert stored.head == await redis_storage.load_head(run_id)
    await redis_storage.aclose()


# -- the claim's own events (`events`): written with the claim when the call makes no status
# write (the audit of who gave a payload that another execution applies)

ACCEPTED = [b"accepted-by-ann"]


async def test_claim_and_lock_writes_the_claims_events_when_another_owner_holds_the_run(
        storage: Storage) -> None:
    run_id = await _waiting(storage)
    assert await storage.acquire_lock(run_id, OTHER, 10.0)
    assert await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
                                        check=_check(), events=ACCEPTED) == (
        ClaimResult.ACCEPTED, None)
    assert await storage.claims(run_id) == {"approve": b"p"}
    assert await storage.history(run_id) == [b"e1", b"e2", *ACCEPTED]
    assert await storage.lock_owner(run_id) == OTHER
    head = await storage.load_head(run_id)
    assert head is not None and head.status == "paused"  # the holder resumes it


@pytest.mark.parametrize("why", ["running", "no resume", "changed"])
async def test_claim_and_lock_writes_the_claims_events_when_it_makes_no_status_write(
        storage: Storage, why: str) -> None:
    """Locked, but no `running` write: the run was running already, the caller asked for none
    (gates first), or it changed since the caller read it: the claim's events are written."""
    run_id = await _waiting(storage, status="running" if why == "running" else "paused")
    if why == "changed":
        outcome, stored = await storage.claim_and_lock(
            run_id, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
            then=_resumption(expected=b"another state"), events=ACCEPTED)
    else:
        outcome, stored = await storage.claim_and_lock(
            run_id, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
            check=_check(resume=why != "no resume"), events=ACCEPTED)
    assert outcome is ClaimResult.ACCEPTED and stored is not None
    assert stored.history == [b"e1", b"e2", *ACCEPTED]  # read after the write, as stored
    assert await storage.history(run_id) == stored.history
    assert await storage.lock_owner(run_id) == RESUMER


@pytest.mark.parametrize("how", ["check", "then"])
async def test_claim_and_lock_with_its_status_write_writes_only_that_writes_events(
        storage: Storage, how: str) -> None:
    run_id = await _waiting(storage) if how == "check" else await _paused(storage)
    options: dict[str, Any] = {"check": _check()} if how == "check" else {
        "then": _resumption()}
    outcome, stored = await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                   lock_ttl=10.0, events=ACCEPTED, **options)
    assert outcome is ClaimResult.ACCEPTED and stored is not None
    assert stored.head.status == "running"
    assert await storage.history(run_id) == [b"e1", b"e2", b"resumed"]  # one event, not two


async def test_claim_and_lock_refused_writes_none_of_the_claims_events(
        storage: Storage) -> None:
    taken = await _waiting(storage)
    assert await storage.claim(taken, "approve", b"first") is ClaimResult.ACCEPTED
    assert await storage.acquire_lock(taken, OTHER, 10.0)
    assert await storage.claim_and_lock(taken, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
                                        events=ACCEPTED) == (ClaimResult.TAKEN, None)
    done = await _waiting(storage, status="completed")
    assert await storage.claim_and_lock(done, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
                                        events=ACCEPTED) == (ClaimResult.NOT_RESUMABLE, None)
    refused = await _waiting(storage, _state(waiting_on=["other"]))
    outcome, _ = await storage.claim_and_lock(refused, "approve", b"p", owner=RESUMER,
                                              lock_ttl=10.0, check=_check(), events=ACCEPTED)
    assert outcome is ClaimResult.REFUSED
    for run_id in (taken, done, refused):
        assert await storage.history(run_id) == [b"e1", b"e2"]
    assert await storage.claims(refused) == {} and await storage.claims(done) == {}


async def test_claim_and_lock_claims_events_keep_the_history_limit(
        factory: Callable[..., Storage]) -> None:
    storage = factory(history_limit=3)
    run_id = await _waiting(storage)  # e1, e2
    assert await storage.acquire_lock(run_id, OTHER, 10.0)
    assert await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER, lock_ttl=10.0,
                                        events=[b"a1", b"a2"]) == (ClaimResult.ACCEPTED, None)
    assert await storage.history(run_id) == [b"e2", b"a1", b"a2"]


async def test_redis_claim_and_lock_replayed_writes_the_claims_events_once(
        redis_url: str) -> None:
    """A retry after a lost reply (the same call sent twice) appends the claim's events once,
    also when the holder's lock is gone by the retry."""
    redis_storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    run_id = await _paused(redis_storage)
    assert await redis_storage.acquire_lock(run_id, OTHER, 10.0)
    conn = await redis_storage._redis.get()
    keys = redis_storage._keys.run_keys(run_id)
    args: list[Any] = ["token-1", "approve", b"p", 60_000, RESUMER, 10_000, "1.0", 100, run_id,
                       "", *ACCEPTED]
    first = await conn.script("claim_lock_load", keys, args)
    assert await redis_storage.release_lock(run_id, OTHER) == 0
    again = await conn.script("claim_lock_load", keys, args)
    assert first == [b"accepted", 0] and again[:2] == [b"accepted", 1]
    assert await redis_storage.history(run_id) == [b"e1", b"e2", *ACCEPTED]
    assert await redis_storage.release_lock(run_id, RESUMER) == 0
    await redis_storage.aclose()


FINGERPRINT = {"prep": ["step"], "approve": ["interrupt", "prep"]}
SEALED = 82  # (protection.envelope.EXT_CODE: the check takes any ext type)


def _meta(inputs: bytes, *, reactor: str = "flow", run_id: str = "r-1") -> bytes:
    """A run's meta as the runtime encodes it (`records.RunMeta`), with these inputs bytes."""
    return records.encode(records.RunMeta(v=1, id=run_id, reactor=reactor, created_at=1.5,
                                          inputs=msgspec.Raw(inputs), fingerprint=FINGERPRINT))


def _ext(code: int, size: int) -> bytes:
    return msgspec.msgpack.encode(msgspec.msgpack.Ext(code, bytes(size)))


@pytest.mark.parametrize(("inputs", "refused"), [
    (_ext(SEALED, 40), True),  # ext 8
    (_ext(SEALED, 300), True),  # ext 16
    (_ext(SEALED, 70_000), True),  # ext 32
    (_ext(SEALED, 8), True),  # fixext 8
    (msgspec.msgpack.encode({"item": "tea"}), False),
    (msgspec.msgpack.encode({"note": _ext(SEALED, 40)}), False),  # bytes that look sealed
    (_ext(5, 40), False),  # another ext type
    (msgspec.msgpack.encode(None), False),
], ids=["ext8", "ext16", "ext32", "fixext", "clear", "clear-lookalike", "other-ext", "nil"])
async def test_claim_and_lock_check_refuses_a_clear_payload_for_sealed_inputs(
        storage: Storage, inputs: bytes, refused: bool) -> None:
    """`refuse_ext`: a run whose inputs are an ext value of that type (a sealed run, to a
    process holding no codec) is refused and nothing is written; any other inputs pass. The
    meta is read as a run's is, whatever the size of its id and reactor name."""
    for reactor in ("flow", "f" * 40, "g" * 300):
        meta = _meta(inputs, reactor=reactor, run_id="r" * 33)
        run_id = await _waiting(storage, meta=meta, reactor=reactor)
        before = await storage.load_run(run_id, history=True, claims=True)
        check = msgspec.structs.replace(_check(reactor=reactor), refuse_ext=SEALED)
        outcome, stored = await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                       lock_ttl=10.0, check=check)
        if refused:
            assert outcome is ClaimResult.REFUSED and stored is not None
            assert before is not None and stored.head == before.head
            assert await storage.load_run(run_id, history=True, claims=True) == before
            assert await storage.lock_owner(run_id) is None
        else:
            assert outcome is ClaimResult.ACCEPTED, (reactor, inputs[:4])
            assert stored is not None and stored.claims == {"approve": b"p"}
        unchecked = await _waiting(storage, meta=meta, reactor=reactor)
        outcome, _ = await storage.claim_and_lock(unchecked, "approve", b"p", owner=RESUMER,
                                                  lock_ttl=10.0, check=_check(reactor=reactor))
        assert outcome is ClaimResult.ACCEPTED  # (without refuse_ext: no such check)


async def test_claim_and_lock_check_refuses_a_meta_it_cannot_read_as_a_runs(
        storage: Storage) -> None:
    """With `refuse_ext`, a meta not laid out as a run's (the check cannot tell its inputs)
    is refused, writing nothing: the caller decides from the head given back."""
    run_id = await _waiting(storage)  # (META: the marker inside bytes that are no msgpack map)
    check = msgspec.structs.replace(_check(), refuse_ext=SEALED)
    outcome, stored = await storage.claim_and_lock(run_id, "approve", b"p", owner=RESUMER,
                                                   lock_ttl=10.0, check=check)
    assert outcome is ClaimResult.REFUSED and stored is not None
    assert await storage.claims(run_id) == {}
