"""`Storage.migrate_run` (storage/contract/runs.py, api.md §14): the fenced, atomic rewrite of a
run onto another version of its reactor. Its meta, state, the step records written and removed
and its events land in one write; the status, claims, control request, lock and indexes stay
as they were. A non-owner is refused with `LockLost`, a stale `expected_meta` with False, a run
whose record is gone with `RunRecordGone`, each writing nothing; on Redis the retry of an applied
write (its token) is recognised. On every backend (the storage contract), the Redis Cluster
included."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pytest

from reactorflow.errors import LockLost, RunRecordGone
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ClaimResult
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import redis_namespace
from tests.storage.test_contract import OTHER, OWNER, new_id, new_run

V1 = b"meta-v1"
V2 = b"meta-v2"


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


async def _migrate(storage: Storage, run_id: str, *, owner: str = OWNER,
                   expected: bytes = V1, meta: bytes = V2, state: bytes = b"state-v2",
                   steps: Mapping[str, bytes] | None = None, removed: Sequence[str] = (),
                   events: Sequence[bytes] = (b"run.migrated",)) -> bool:
    return await storage.migrate_run(
        run_id, owner, expected_meta=expected, meta=meta, state=state,
        steps={"charge": b"charge-v2"} if steps is None else steps, removed=removed,
        events=events)


async def _v1_run(storage: Storage) -> str:
    """A paused version-1 run with two step records, a claim, a counter and a control
    request pending (the parts a migration must leave alone)."""
    run_id = await new_run(storage, meta=V1, events=[b"run.started"])
    await storage.save_step(run_id, OWNER, "bill", b"bill-v1", [b"step.bill"])
    await storage.save_step(run_id, OWNER, "ship", b"ship-v1", [b"step.ship"])
    await storage.save_state(run_id, OWNER, status="paused", previous_status="running",
                             state=b"state-v1")
    assert await storage.claim(run_id, "approve", b"yes") is ClaimResult.ACCEPTED
    assert await storage.incr_counter(run_id, "n") == 1
    assert await storage.request_control(run_id, b"cancel")
    return run_id


async def _everything(storage: Storage, run_id: str) -> tuple[Any, ...]:
    """Every part of a run a migration could touch that can be read without a write, to
    compare before and after (`_untouched` checks the others)."""
    return (await storage.load_run(run_id, history=True, claims=True),
            await storage.lock_owner(run_id),
            [h.run_id for h in (await storage.list_runs("flow", "paused", 10, None)).heads])


async def _untouched(storage: Storage, run_id: str) -> None:
    """The control request and the counter `_v1_run` wrote are still there (read by writes:
    last in a test)."""
    assert await storage.incr_counter(run_id, "n") == 2
    assert await storage.save_step(run_id, OWNER, "probe", b"p") == b"cancel"


async def test_one_write_rewrites_meta_state_steps_and_appends_its_events(
        storage: Storage) -> None:
    run_id = await _v1_run(storage)
    before = await storage.load_run(run_id, history=True, claims=True)
    assert before is not None

    assert await _migrate(storage, run_id, steps={"charge": b"charge-v2", "ship": b"ship-v2"},
                          removed=["bill", "ship", "never-stored"]) is True

    after = await storage.load_run(run_id, history=True, claims=True)
    assert after is not None
    assert (after.head.meta, after.head.state) == (V2, b"state-v2")
    # removed ("bill"), written ("charge"), both written and removed: written ("ship")
    assert after.steps == {"charge": b"charge-v2", "ship": b"ship-v2"}
    assert after.history == [*(before.history or []), b"run.migrated"]
    # what a migration does not change
    assert (after.head.status, after.head.reactor, after.head.created_at) == (
        "paused", "flow", before.head.created_at)
    assert after.claims == {"approve": b"yes"}
    assert await storage.lock_owner(run_id) == OWNER
    assert [h.run_id for h in (await storage.list_runs("flow", "paused", 10, None)).heads
            ] == [run_id]
    assert await storage.load_step(run_id, "charge") == b"charge-v2"
    assert await storage.load_step(run_id, "bill") is None
    await _untouched(storage, run_id)


async def test_a_migration_that_writes_no_step_and_removes_every_one(storage: Storage) -> None:
    run_id = await _v1_run(storage)
    assert await _migrate(storage, run_id, steps={}, removed=["bill", "ship"], events=()) is True
    after = await storage.load_run(run_id)
    assert after is not None and after.head.meta == V2 and after.steps == {}
    await storage.save_step(run_id, OWNER, "charge", b"later")  # the run goes on
    assert (await storage.load_run(run_id) or after).steps == {"charge": b"later"}


async def test_a_non_owner_is_refused_and_nothing_is_written(storage: Storage) -> None:
    run_id = await _v1_run(storage)
    before = await _everything(storage, run_id)
    with pytest.raises(LockLost) as lost:
        await _migrate(storage, run_id, owner=OTHER, removed=["bill"])
    assert not isinstance(lost.value, RunRecordGone)  # the record is there: another owns it
    assert (lost.value.run_id, lost.value.owner) == (run_id, OTHER)
    assert await _everything(storage, run_id) == before
    await _untouched(storage, run_id)


async def test_a_released_lock_refuses_its_former_owner(storage: Storage) -> None:
    run_id = await _v1_run(storage)
    assert await storage.release_lock(run_id, OWNER) == 0
    before = await _everything(storage, run_id)
    with pytest.raises(LockLost):
        await _migrate(storage, run_id, removed=["bill"])
    assert await _everything(storage, run_id) == before


async def test_a_stale_expected_meta_returns_false_and_writes_nothing(storage: Storage) -> None:
    """Another migration landed first (the stored meta is V2): this one, computed from V1,
    must not be applied on top of it."""
    run_id = await _v1_run(storage)
    assert await _migrate(storage, run_id, steps={"charge": b"first"}) is True
    before = await _everything(storage, run_id)
    assert await _migrate(storage, run_id, meta=b"meta-v3", state=b"state-v3",
                          steps={"charge": b"second", "new": b"x"}, removed=["ship"],
                          events=[b"second.migration"]) is False
    assert await _everything(storage, run_id) == before
    await _untouched(storage, run_id)


async def test_the_history_limit_is_kept(factory: Callable[..., Storage]) -> None:
    limited = factory(history_limit=3)
    run_id = await new_run(limited, meta=V1, events=[b"1", b"2"])
    assert await _migrate(limited, run_id, events=[b"3", b"4"]) is True
    assert await limited.history(run_id) == [b"2", b"3", b"4"]
    assert await _migrate(limited, run_id, expected=V2, meta=b"meta-v3",
                          events=[b"5", b"6", b"7", b"8"]) is True
    assert await limited.history(run_id) == [b"6", b"7", b"8"]


async def test_a_run_that_is_gone_is_refused_with_record_gone(storage: Storage) -> None:
    run_id = new_id()
    with pytest.raises(RunRecordGone) as gone:
        await _migrate(storage, run_id)
    assert (gone.value.run_id, gone.value.owner) == (run_id, OWNER)
    assert await storage.load_run(run_id) is None
    assert await storage.history(run_id) == []


# -- Redis: retry tokens and the script's replies -----------------------------------------------


@pytest.fixture
async def redis_storage(redis_url: str) -> AsyncIterator[RedisStorage]:
    backend = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    yield backend
    await backend.aclose()


async def test_redis_a_migration_retried_after_another_write_is_applied_once(
        redis_storage: RedisStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    """A's reply is lost; B (the owner's next checkpoint) is applied; redis-py then resends A
    with A's token: A is recognised as applied (True, though the stored meta is no longer its
    expected one) and not applied again (its events twice, B's record overwritten)."""
    run_id = await new_run(redis_storage, meta=V1)
    await redis_storage.save_step(run_id, OWNER, "bill", b"bill-v1")
    tokens = iter(["a" * 16, "b" * 16, "a" * 16])
    monkeypatch.setattr("reactorflow.storage.redis.storage._token", lambda: next(tokens))

    assert await _migrate(redis_storage, run_id, removed=["bill"], events=[b"A"]) is True
    await redis_storage.save_step(run_id, OWNER, "charge", b"B-charge", [b"B"])
    assert await _migrate(redis_storage, run_id, removed=["bill"], events=[b"A"]) is True

    stored = await redis_storage.load_run(run_id, history=True)
    assert stored is not None
    assert stored.history == [b"A", b"B"]
    assert stored.steps == {"charge": b"B-charge"}
    assert (stored.head.meta, stored.head.state) == (V2, b"state-v2")


async def test_redis_a_refused_migration_sent_again_is_refused_again(
        redis_storage: RedisStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal records no token: the refused call's retry is not taken for a write that
    applied (the fence's refusal, and the stale meta's)."""
    run_id = await new_run(redis_storage, meta=V1)
    monkeypatch.setattr("reactorflow.storage.redis.storage._token", lambda: "f" * 16)
    for _ in range(2):
        with pytest.raises(LockLost):
            await _migrate(redis_storage, run_id, owner=OTHER)
    for _ in range(2):
        assert await _migrate(redis_storage, run_id, expected=b"meta-v0") is False
    stored = await redis_storage.load_run(run_id, history=True)
    assert stored is not None
    assert (stored.head.meta, stored.steps, stored.history) == (V1, {}, [])


async def test_redis_the_script_replies_minus_one_for_a_run_that_is_gone(
        redis_storage: RedisStorage) -> None:
    conn = await redis_storage._redis.get()
    run_id = new_id()
    keys = redis_storage._keys.run_keys(run_id)
    reply = await conn.script("migrate_run", keys,
                              ["t", OWNER, V1, V2, b"s", "1", 10, 1, 1, "a", b"r", "b", b"e"])
    assert reply[0] == -1
    client = conn.client
    assert [await client.exists(key) for key in keys] == [0] * len(keys)
