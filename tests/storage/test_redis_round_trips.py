"""RedisStorage: what one write costs on the server (commands counted with MONITOR), the expiry rule
of storage/contract/storage.py as Redis implements it (no TTL while a run lives, the run's expiry
for keys created later; tests/storage/test_retention.py has the rule on every backend), and retry
tokens over a long run."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import redis_namespace
from tests.storage.test_contract import OWNER, _commands_during, new_run

RUN_PARTS = ("run", "steps", "hist", "ctl", "claims", "ctr", "tok")


@pytest.fixture
async def rig(redis_url: str) -> AsyncIterator[tuple[RedisStorage, redis.asyncio.Redis]]:
    """A storage (retention 10 minutes) and a plain client of its server."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace(), retention=600)
    client = redis.asyncio.Redis.from_url(redis_url)
    yield storage, client
    await client.aclose()
    await storage.aclose()


def _from_client(seen: list[dict[str, Any]]) -> list[str]:
    return [c["command"].split(" ", 1)[0].upper() for c in seen if c["client_type"] != "lua"]


def _in_lua(seen: list[dict[str, Any]]) -> list[str]:
    return [c["command"] for c in seen if c["client_type"] == "lua"]


async def _ttls(raw: redis.asyncio.Redis, storage: RedisStorage, run_id: str) -> dict[str, int]:
    found = {}
    for part in RUN_PARTS:
        key = f"{storage._keys.ns}:{part}:{{{run_id}}}"
        if await raw.exists(key):
            found[part] = await raw.pttl(key)
    return found


async def test_redis_a_step_checkpoint_sets_no_ttl(
        rig: tuple[RedisStorage, redis.asyncio.Redis], redis_url: str) -> None:
    redis_storage, _ = rig
    run_id = await new_run(redis_storage, events=[b"e"])
    await redis_storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"])

    seen = await _commands_during(
        redis_url, lambda: redis_storage.save_step(run_id, OWNER, "a", b"rec-2", [b"ev-2"]))

    assert _from_client(seen) == ["EVALSHA"]
    lua = _in_lua(seen)
    assert not [c for c in lua if c.upper().startswith(("PEXPIRE", "TIME"))], lua  # live: none
    assert not [c for c in lua if c.upper().startswith("LTRIM")], lua  # under the limit
    # was 16 (7 PEXPIRE, LTRIM, a 17 KB token window read and written), then 8 (its token an
    # HSETNX of its own), then 7 (TIME for the expiry horizon): HMGET run, HGET lock, HSET
    # steps, HSET run, RPUSH hist, GET ctl
    assert len(lua) <= 6, lua


async def test_redis_a_run_written_with_ttls_before_the_rule_is_kept_by_its_next_status_write(
        rig: tuple[RedisStorage, redis.asyncio.Redis]) -> None:
    """A run an older version wrote (every key with a TTL, `exp` its expiry horizon) that is
    still live: the next write that stores a live status removes the TTLs (PERSIST)."""
    redis_storage, raw = rig
    run_id = await new_run(redis_storage, events=[b"e"])
    await redis_storage.save_step(run_id, OWNER, "a", b"rec")
    await redis_storage.claim(run_id, "approve", b"p")
    await redis_storage.incr_counter(run_id, "n")
    run_key = redis_storage._keys.run(run_id)
    await raw.hset(run_key, "exp", int(time.time() * 1000) + 300_000)
    for part in (await _ttls(raw, redis_storage, run_id)):
        await raw.pexpire(f"{redis_storage._keys.ns}:{part}:{{{run_id}}}", 300_000)

    await redis_storage.save_state(run_id, OWNER, status="paused", previous_status="running",
                                   state=b"s")

    ttls = await _ttls(raw, redis_storage, run_id)
    assert set(ttls) == {"run", "steps", "hist", "claims", "ctr", "tok"}
    assert all(ttl == -1 for ttl in ttls.values()), ttls
    assert await raw.hget(run_key, "exp") is None


async def test_redis_keys_a_write_creates_take_the_runs_expiry(
        rig: tuple[RedisStorage, redis.asyncio.Redis]) -> None:
    """Writes that store no status: on an ended run the keys they create (steps, history,
    claims, control, counters) get the run's expiry, none is left without a TTL; on a live
    run none gets one."""
    redis_storage, raw = rig
    live, ended = await new_run(redis_storage), await new_run(redis_storage, status="completed")
    await redis_storage.claim(live, "approve", b"p")  # (an ended run takes no payload)
    for run_id in (live, ended):  # no events at creation: no history key yet
        await redis_storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"])
        await redis_storage.incr_counter(run_id, "n")
        await redis_storage.request_control(run_id, b"cancel")

    assert set(await _ttls(raw, redis_storage, live)) == set(RUN_PARTS)
    assert all(ttl == -1 for ttl in (await _ttls(raw, redis_storage, live)).values())
    expiry = int(await raw.hget(redis_storage._keys.run(ended), "exp"))
    ttls = await _ttls(raw, redis_storage, ended)
    assert set(ttls) == set(RUN_PARTS) - {"claims"}
    now_ms = int(time.time() * 1000)
    for part, ttl in ttls.items():
        assert 0 < ttl <= expiry - now_ms + 1000, (part, ttl)


async def test_redis_a_write_retried_after_1000_others_is_applied_once(
        rig: tuple[RedisStorage, redis.asyncio.Redis], monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokens are kept by generation (1024 writes at least): a write's retry after 1000 others
    of the same run (generations rolled over, older ones dropped) is still recognised."""
    redis_storage, _ = rig
    run_id = await new_run(redis_storage)
    await redis_storage.save_step(run_id, OWNER, "a", b"rec", [b"A"])
    for i in range(1000):
        await redis_storage.save_step(run_id, OWNER, f"s{i}", b"r")
    conn = await redis_storage._redis.get()
    tokens = iter(["fixed-token-a", "fixed-token-a"])
    monkeypatch.setattr("reactorflow.storage.redis.storage._token", lambda: next(tokens))
    await redis_storage.save_step(run_id, OWNER, "b", b"rec", [b"B"])
    monkeypatch.undo()
    for i in range(1000, 2000):
        await redis_storage.save_step(run_id, OWNER, f"s{i}", b"r")
    keys = redis_storage._keys.run_keys(run_id)
    args: list[Any] = ["fixed-token-a", OWNER, "b", b"rec", repr(time.time()), 1000, "", "",
                       b"B"]
    assert (await conn.script("save_step", keys, args))[0] == 1  # the retry, 1000 writes later
    assert (await redis_storage.history(run_id)).count(b"B") == 1


async def test_redis_a_chain_costs_one_command_per_step_and_one_per_run_end(
        redis_url: str) -> None:
    """A 3-step chain on one node: create_run (its index writes in its script), one EVALSHA per
    step but the last, whose record rides in the final save with its release and index moves
    in its script: 4 commands (5 before the last step's record was folded into the final
    save), no pipelines, no index commands from the client."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    rf.configure(storage=storage)
    flow = rf.Reactor(f"chain-{redis_namespace()}")

    @flow.step
    async def a() -> int:
        return 1

    @flow.step
    async def b(a: int) -> int:
        return a + 1

    @flow.step
    async def c(b: int) -> int:
        return b + 1

    try:
        assert (await flow.run()).value == 3  # warm: scripts loaded, connection open
        seen = await _commands_during(redis_url, flow.run)
    finally:
        await storage.aclose()
    assert _from_client(seen) == ["EVALSHA"] * 4, _from_client(seen)


async def test_redis_an_element_jobs_lock_and_reads_are_one_command(
        rig: tuple[RedisStorage, redis.asyncio.Redis], redis_url: str) -> None:
    """An element job's start (its lock, its slot, the map's job data, its item) is one
    EVALSHA: no pipeline of reads beside the lock (a fanned-out map pays it per element)."""
    redis_storage, _ = rig
    run_id = await new_run(redis_storage)
    await redis_storage.save_elements(run_id, "m", {0: b"e0"})
    await redis_storage.save_elements(run_id, "m#items", {0: b"i0", 1: b"i1"})
    ranges = [("m", 1, 1), ("m#job", 0, 2), ("m#items", 1, 1)]
    await redis_storage.lock_and_load_elements(f"{run_id}:m:0", "me", 10.0, run_id, ranges)

    seen = await _commands_during(redis_url, lambda: redis_storage.lock_and_load_elements(
        f"{run_id}:m:1", "me", 10.0, run_id, ranges))

    assert _from_client(seen) == ["EVALSHA"]
    assert [c.split(" ", 1)[0].strip('"').upper() for c in _in_lua(seen)].count("HMGET") == 3
    found = await redis_storage.lock_and_load_elements(f"{run_id}:m:1", "me", 10.0, run_id,
                                                       ranges)
    assert found == [[None], [None, None], [b"i1"]]


async def test_redis_an_element_jobs_start_is_one_command(
        rig: tuple[RedisStorage, redis.asyncio.Redis], redis_url: str) -> None:
    """An element job's start (its lock, the map's fence and its started mark, its slot, the
    map's job data, its item) is one EVALSHA on a single node."""
    redis_storage, _ = rig
    run_id = await new_run(redis_storage)
    await redis_storage.save_elements(run_id, "m#items", {0: b"i0", 1: b"i1"})
    ranges = [("m", 1, 1), ("m#job", 0, 1), ("m#items", 1, 1)]
    await redis_storage.start_element(f"{run_id}:m:0", "me", 10.0, run_id, ranges,
                                      starts=("m#started", 0), stop=("m#job", 1))

    seen = await _commands_during(redis_url, lambda: redis_storage.start_element(
        f"{run_id}:m:1", "me", 10.0, run_id, ranges, starts=("m#started", 1),
        stop=("m#job", 1)))

    assert _from_client(seen) == ["EVALSHA"]
    assert await redis_storage.load_elements(run_id, "m#started", 0, 2) == [b"1", b"1"]


async def test_redis_a_locked_run_folds_its_last_step_and_drops_its_lock_after_the_write(
        redis_url: str) -> None:
    """A 1-step run holding a reactor `rf.Lock` on one node: the lock's acquire, create_run,
    and the final save carrying the step's record with the lock's release after the write in
    the same script (`save_release`: a save refused by a control request drops nothing): no
    checkpoint of its own, no index commands from the client (before, the locked run kept its
    last checkpoint and sent the release before the save: 8 commands; then the release was a
    script of its own after the save in its round trip: 4)."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    rf.configure(storage=storage)
    flow = rf.Reactor(f"locked-{redis_namespace()}", gates=[rf.Lock("fold-lock")])

    @flow.step
    async def only() -> int:
        return 1

    try:
        assert (await flow.run()).value == 1  # warm: scripts loaded, connection open
        seen = await _commands_during(redis_url, flow.run)
        assert await storage.gate_holders("fold-lock") == []
    finally:
        await storage.aclose()
    # the release runs in the save's own script, after its write: one command, one script
    assert _from_client(seen) == ["EVALSHA", "EVALSHA", "EVALSHA"], _from_client(seen)
    final = _script_commands(seen, 2)
    assert "HSET" in final and "ZREM" in final, final
    assert final.index("HSET") < final.index("ZREM"), final  # save before release


def _script_commands(seen: list[dict[str, Any]], nth: int) -> list[str]:
    """The Lua-issued command names of the `nth` (0-based) client command of `seen`."""
    found: list[list[str]] = []
    for c in seen:
        if c["client_type"] != "lua":
            found.append([])
        elif found:
            found[-1].append(c["command"].split(" ", 1)[0].strip('"').upper())
    return found[nth]


async def test_redis_continue_claims_locks_resumes_and_loads_in_17_script_commands(
        redis_url: str) -> None:
    """`continue_` of a paused run: its first command (claim_lock_load) claims, locks, writes
    the resumption, moves the index entries and reads the run in 17 commands, no more: the
    claims hash read once (an HGETALL that answers the claim checks and the reply; was HEXISTS
    + HGETALL), no TIME (was one per write, then one: a live run's writes set no TTL), one HSET
    of the tok hash for both tokens (was two): 20 before."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    rf.configure(storage=storage)
    flow = rf.Reactor(f"cont-{redis_namespace()}")

    @flow.step
    async def prep() -> int:
        return 1

    @flow.interrupt
    async def approve(payload: int, prep: int) -> int:
        return payload + prep

    @flow.step
    async def finish(approve: int) -> int:
        return approve + 1

    try:
        warm = await flow.run()  # warm: scripts loaded, connection open
        assert (await flow.continue_(warm.id, step="approve", payload=41)).value == 43
        paused = await flow.run()
        assert paused.status is rf.Status.PAUSED
        seen = await _commands_during(
            redis_url, lambda: flow.continue_(paused.id, step="approve", payload=41))
    finally:
        await storage.aclose()
    lua = _script_commands(seen, 0)
    assert "HEXISTS" not in lua and "TIME" not in lua, lua
    assert len(lua) <= 17, lua


async def test_redis_a_final_save_releasing_the_lock_reads_its_count_with_the_fence(
        rig: tuple[RedisStorage, redis.asyncio.Redis], redis_url: str) -> None:
    """A final save that leaves the lock (flag "r") reads the lock's count with its owner (one
    HMGET) and deletes the lock at its last hold: no HINCRBY before the DEL (12 commands, was
    13); a re-entered lock is counted down, not deleted."""
    redis_storage, raw = rig
    run_id = await new_run(redis_storage)
    lock_key = f"{redis_storage._keys.ns}:lock:{{{run_id}}}"

    seen = await _commands_during(redis_url, lambda: redis_storage.save_state(
        run_id, OWNER, status="completed", previous_status="running", state=b"done",
        release=True))

    lua = _script_commands(seen, 0)
    assert "HINCRBY" not in lua and "DEL" in lua, lua
    assert not await raw.exists(lock_key)
    again = await new_run(redis_storage)
    assert await redis_storage.acquire_lock(again, OWNER, 10.0)  # re-entered: count 2
    await redis_storage.save_state(again, OWNER, status="completed", previous_status="running",
                                   state=b"done", release=True)
    assert await raw.hget(f"{redis_storage._keys.ns}:lock:{{{again}}}", "count") == b"1"
