"""Every read path turns a corrupt record into `rf.CorruptRecord` for that run only: `get`,
`continue_`, `cancel`, listing (which marks or leaves out the run instead of failing the page),
and one garbage history entry never makes a run unreadable."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import unique

VANDAL = "vandal"
GARBAGE = b"\xc1 not msgpack"  # 0xc1 is never valid MessagePack


def _gated() -> rf.Reactor:
    flow = rf.Reactor(unique("corrupt-read"))

    @flow.step
    async def first() -> int:
        return 1

    @flow.interrupt
    async def gate(payload: str, first: int) -> str:
        return payload

    return flow


async def _as_vandal(storage: rf.Storage, run_id: str, *, status: str | None = None,
                     state: bytes | None = None, events: list[bytes] | None = None) -> None:
    """Overwrite parts of a stored run through the storage contract itself."""
    head = await storage.load_head(run_id)
    assert head is not None
    assert await storage.acquire_lock(run_id, VANDAL, 5.0)
    await storage.save_state(run_id, VANDAL, status=status or head.status,
                             previous_status=head.status,
                             state=head.state if state is None else state, events=events or ())
    assert await storage.release_lock(run_id, VANDAL) == 0


async def _garble_meta(storage: rf.Storage, run_id: str) -> None:
    """Meta is written once, at creation: only something outside reactorflow changes it."""
    if isinstance(storage, MemoryStorage):
        storage._runs[run_id].meta = GARBAGE
    else:
        assert isinstance(storage, RedisStorage)
        conn = await storage._redis.get()
        await conn.client.hset(storage._keys.run(run_id), "meta", GARBAGE)


async def _paused(flow: rf.Reactor) -> str:
    run = await flow.run()
    assert run.status is rf.Status.PAUSED
    return run.id


@pytest.mark.parametrize("part", ["meta", "state", "status"])
async def test_continue_of_a_corrupt_paused_run_is_corrupt_record(storage: rf.Storage,
                                                                  part: str) -> None:
    flow = _gated()
    run_id = await _paused(flow)
    healthy = await _paused(flow)
    if part == "meta":
        await _garble_meta(storage, run_id)
    elif part == "state":
        await _as_vandal(storage, run_id, state=GARBAGE)
    else:
        await _as_vandal(storage, run_id, status="sleeping")

    with pytest.raises(rf.CorruptRecord) as caught:
        await flow.continue_(run_id, step="gate", payload="ok")
    assert caught.value.run_id == run_id and run_id in str(caught.value)
    if part == "status":
        assert "'sleeping' is not one this version of reactorflow knows" in str(caught.value)
    resumed = await flow.continue_(healthy, step="gate", payload="ok")  # only that run
    assert resumed.status is rf.Status.COMPLETED


@pytest.mark.parametrize("part", ["state", "status", "step"])
async def test_get_and_cancel_of_a_corrupt_run_are_corrupt_record(storage: rf.Storage,
                                                                  part: str) -> None:
    flow = _gated()
    run_id = await _paused(flow)
    if part == "state":
        await _as_vandal(storage, run_id, state=GARBAGE)
    elif part == "status":
        await _as_vandal(storage, run_id, status="sleeping")
    else:
        assert await storage.acquire_lock(run_id, VANDAL, 5.0)
        await storage.save_step(run_id, VANDAL, "first",
                                msgspec.msgpack.encode(["no-such-status", 1]))
        await storage.release_lock(run_id, VANDAL)

    with pytest.raises(rf.CorruptRecord) as caught:
        await flow.get(run_id)
    assert caught.value.run_id == run_id
    if part != "step":
        with pytest.raises(rf.CorruptRecord):
            await flow.cancel(run_id)


async def test_a_garbage_history_entry_leaves_the_run_readable(storage: rf.Storage) -> None:
    flow = _gated()
    run_id = await _paused(flow)
    await _as_vandal(storage, run_id, events=[GARBAGE])

    run = await flow.get(run_id)
    assert run.status is rf.Status.PAUSED
    kinds = [e.kind for e in run.history]
    assert kinds.count("history.unreadable") == 1
    assert "run.started" in kinds and "run.paused" in kinds
    done = await flow.continue_(run_id, step="gate", payload="ok")
    assert done.status is rf.Status.COMPLETED
    assert done == await flow.get(run_id)


async def test_listing_marks_or_leaves_out_corrupt_runs_instead_of_failing(
        storage: rf.Storage) -> None:
    flow = _gated()
    healthy = await _paused(flow)
    bad_state = await _paused(flow)
    bad_status = await _paused(flow)
    await _as_vandal(storage, bad_state, status="completed", state=GARBAGE)
    await _as_vandal(storage, bad_status, status="sleeping")

    page = await flow.list_runs()
    by_id = {s.id: s for s in page.runs}
    assert set(by_id) == {healthy, bad_state}  # an unknown status cannot be shown
    assert by_id[healthy].error is None
    marked = by_id[bad_state]
    assert marked.status is rf.Status.COMPLETED
    assert marked.error is not None and marked.error.type == "CorruptRecord"
    assert bad_state in marked.error.message
    assert [s.id for s in (await rf.list_runs(reactor=flow.name)).runs] == [bad_state, healthy]
