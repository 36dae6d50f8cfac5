"""`save_state(unless_control=True)` (the final save that carries a run's last step): written
when no control request is pending; refused, writing nothing and returning the request, when
one is. Both backends (the storage contract)."""

from __future__ import annotations

from reactorflow.storage.base import Storage
from tests.storage.test_contract import OWNER, new_run


async def _final(storage: Storage, run_id: str) -> bytes | None:
    return await storage.save_state(
        run_id, OWNER, status="completed", previous_status="running", state=b"state-1",
        steps={"last": b"record"}, events=[b"step", b"run"], publish=True, release=True,
        unless_control=True)


async def test_written_when_no_control_request_is_pending(storage: Storage) -> None:
    run_id = await new_run(storage, events=[b"created"])
    assert await _final(storage, run_id) is None
    stored = await storage.load_run(run_id, history=True)
    assert stored is not None and stored.head.status == "completed"
    assert stored.steps == {"last": b"record"}
    assert stored.history == [b"created", b"step", b"run"]
    assert await storage.lock_owner(run_id) is None  # released with it


async def test_refused_while_a_control_request_is_pending(storage: Storage) -> None:
    run_id = await new_run(storage, events=[b"created"])
    assert await storage.request_control(run_id, b"cancel")
    assert await _final(storage, run_id) == b"cancel"
    stored = await storage.load_run(run_id, history=True)
    assert stored is not None and stored.head.status == "running"
    assert stored.head.state == b"state-0" and stored.steps == {}
    assert stored.history == [b"created"]
    assert await storage.lock_owner(run_id) == OWNER  # still held
    assert [h.run_id for h in (await storage.list_runs("flow", "running", 10, None)).heads
            ] == [run_id]
    assert (await storage.list_runs("flow", "completed", 10, None)).heads == []
