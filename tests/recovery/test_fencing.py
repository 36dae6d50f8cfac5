"""Zombie writers: an execution whose lock expired and was taken over writes nothing more."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.runtime.engine.execution import event
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import unique, until_lock_lapses


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    """The storage on each backend in turn, the Redis Cluster included (the cluster lane)."""
    async for backend in on_every(request):
        yield backend


async def _create(storage: rf.Storage, run_id: str, owner: str, ttl: float) -> None:
    created = await storage.create_run(
        run_id, reactor=unique("zombie"), status="running", meta=b"meta", state=b"state-0",
        created_at=time.time(), owner=owner, lock_ttl=ttl, events=[b"created"])
    assert created


async def test_expired_owner_cannot_write_after_takeover(storage: rf.Storage) -> None:
    run_id = unique("run")
    await _create(storage, run_id, "owner-a", ttl=1.0)
    await storage.save_step(run_id, "owner-a", "s1", b"a-s1", [b"a-event-1"])  # while held

    await until_lock_lapses(storage, run_id)  # A's lock expires: nobody extends it
    with pytest.raises(rf.LockLost):  # expired, not yet taken: still refused
        await storage.save_step(run_id, "owner-a", "s2", b"a-s2-early")

    assert await storage.acquire_lock(run_id, "owner-b", 5.0)
    await storage.save_step(run_id, "owner-b", "s2", b"b-s2", [b"b-event"])
    await storage.save_state(run_id, "owner-b", status="paused", previous_status="running",
                             state=b"b-state", steps={"s1": b"b-s1"}, events=[b"b-paused"])

    with pytest.raises(rf.LockLost) as lost:
        await storage.save_step(run_id, "owner-a", "s2", b"a-s2", [b"a-event-2"])
    assert lost.value.run_id == run_id and lost.value.owner == "owner-a"
    with pytest.raises(rf.LockLost):
        await storage.save_state(run_id, "owner-a", status="completed",
                                 previous_status="running", state=b"a-state",
                                 steps={"s1": b"a-s1-again", "s3": b"a-s3"},
                                 events=[b"a-done"], clear_control=True, publish=True)
    with pytest.raises(rf.LockLost):
        await storage.migrate_run(run_id, "owner-a", expected_meta=b"meta", meta=b"a-meta",
                                  state=b"a-state", steps={"s3": b"a-s3"}, removed=["s2"],
                                  events=[b"a-migrated"])
    assert not await storage.extend_lock(run_id, "owner-a", 5.0)
    assert await storage.release_lock(run_id, "owner-a") == -1
    assert not await storage.acquire_lock(run_id, "owner-a", 5.0)

    stored = await storage.load_run(run_id)
    assert stored is not None
    assert stored.head.status == "paused" and stored.head.state == b"b-state"
    assert stored.head.meta == b"meta"
    assert stored.steps == {"s1": b"b-s1", "s2": b"b-s2"}
    assert await storage.history(run_id) == [b"created", b"a-event-1", b"b-event", b"b-paused"]
    assert await storage.lock_owner(run_id) == "owner-b"
    assert [live.run_id for live in await storage.scan_status(["completed"], 100)] == []
    assert [live.run_id for live in await storage.scan_status(["paused"], 100)] == [run_id]


async def test_execution_whose_lock_was_taken_over_raises_lock_lost(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("takeover"))
    log: list[str] = []
    new_state = records.encode(records.RunState(status="halted", updated_at=time.time(),
                                                halt_reason="taken over by owner-b"))

    @flow.step
    async def first() -> int:
        log.append("first")
        return 1

    @first.undo
    async def undo_first(result: int) -> None:
        log.append("undo first")

    @flow.step
    async def hijacked(first: int, ctx: rf.StepContext) -> int:
        log.append("hijacked")
        # Another execution takes the run over, as if this one's lock had expired: the lock is
        # released under its holder (as expiry would) and taken by owner-b, who writes.
        holder = await storage.lock_owner(ctx.run_id)
        assert holder is not None
        while await storage.release_lock(ctx.run_id, holder) > 0:
            pass
        assert await storage.acquire_lock(ctx.run_id, "owner-b", 30.0)
        await storage.save_step(ctx.run_id, "owner-b", "first", b"b-first",
                                [records.encode(event("b.took.over"))])
        await storage.save_state(ctx.run_id, "owner-b", status="halted",
                                 previous_status="running", state=new_state)
        return 2

    @hijacked.compensate
    async def comp_hijacked(error: Exception) -> None:
        log.append("compensate hijacked")

    @flow.step
    async def never(hijacked: int) -> int:
        log.append("never")
        return 3

    with pytest.raises(rf.LockLost) as lost:
        await flow.run()
    assert not isinstance(lost.value, rf.RunRecordGone)  # the record is there: taken over
    assert "took the run over" in str(lost.value)
    assert log == ["first", "hijacked"]  # nothing after the takeover, no rollback code

    (summary,) = (await flow.list_runs()).runs
    stored = await storage.load_run(summary.id)
    assert stored is not None
    assert stored.head.status == "halted" and stored.head.state == new_state
    assert stored.steps["first"] == b"b-first"
    assert "hijacked" not in stored.steps and "never" not in stored.steps
    kinds = [records.decode_event(raw).kind for raw in await storage.history(summary.id)]
    assert kinds[-1] == "b.took.over"
    assert await storage.lock_owner(summary.id) == "owner-b"  # A's release changed nothing


async def _delete_record(storage: rf.Storage, run_id: str) -> None:
    """Delete every part of the run but its lock, as an operator (or an expiry) would."""
    if isinstance(storage, MemoryStorage):
        run = storage._runs.pop(run_id)  # (no public delete: the record only)
        storage._by_reactor[run.reactor].pop(run_id)
        return
    assert isinstance(storage, RedisStorage)
    client = (await storage._redis.get()).client
    for key in storage._keys.run_keys(run_id)[:7]:  # one by one: a cluster refuses multi-key
        await client.delete(key)


async def test_a_fenced_write_that_finds_the_record_gone_says_so(storage: rf.Storage) -> None:
    """The owner still holds the lock, but the run's record is gone: every fenced write is
    refused with `RunRecordGone` naming the run, not a `LockLost` that says another execution
    took the run over."""
    run_id = unique("run")
    await _create(storage, run_id, "owner-a", ttl=30.0)
    await _delete_record(storage, run_id)

    for write in ("save_step", "save_state", "migrate_run"):
        with pytest.raises(rf.RunRecordGone) as gone:
            if write == "save_step":
                await storage.save_step(run_id, "owner-a", "s1", b"rec")
            elif write == "save_state":
                await storage.save_state(run_id, "owner-a", status="completed",
                                         previous_status="running", state=b"s")
            else:
                await storage.migrate_run(run_id, "owner-a", expected_meta=b"meta",
                                          meta=b"meta-v2", state=b"s", steps={"s1": b"rec"},
                                          removed=[])
        assert isinstance(gone.value, rf.LockLost)  # the execution stops as for a lost lock
        assert gone.value.run_id == run_id and gone.value.owner == "owner-a"
        message = str(gone.value)
        assert run_id in message and "record is gone" in message, message
        assert "took the run over" not in message and "No other execution" in message
    assert await storage.load_head(run_id) is None  # nothing was written


async def test_a_step_whose_run_record_is_deleted_under_it_fails_with_record_gone(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("deleted"))
    log: list[str] = []

    @flow.step
    async def long_step(ctx: rf.StepContext) -> int:
        log.append("long_step")
        await _delete_record(storage, ctx.run_id)  # gone mid-step (deleted, or expired)
        return 1

    @flow.step
    async def never(long_step: int) -> int:
        log.append("never")
        return 2

    with pytest.raises(rf.RunRecordGone) as gone:
        await flow.run()
    assert "record is gone" in str(gone.value)
    assert "took the run over" not in str(gone.value)
    assert log == ["long_step"]  # nothing after it
    assert (await flow.list_runs()).runs == []  # nothing written back
