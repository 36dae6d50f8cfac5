"""`save_state(unless_control=True)` (the final save that carries a run's last step): written
when no control request is pending; refused, writing nothing and returning the request, when
one is; the gates it carries are dropped only when it is written. Every backend (the storage
contract), the Redis Cluster included."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import GateTake
from tests.conftest import ALL_BACKENDS, on_every
from tests.storage.test_contract import OWNER, new_run


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


async def _final(storage: Storage, run_id: str,
                 gates: Sequence[tuple[str, str]] = ()) -> bytes | None:
    return await storage.save_state(
        run_id, OWNER, status="completed", previous_status="running", state=b"state-1",
        steps={"last": b"record"}, events=[b"step", b"run"], publish=True, release=True,
        unless_control=True, gates=gates)


async def _gated(storage: Storage, run_id: str) -> list[tuple[str, str]]:
    gates = [(f"unless-lock-{run_id}", run_id), (f"unless-sem-{run_id}", run_id)]
    assert await storage.gate_acquire(gates[0][0], run_id, limit=1, ttl=30) is GateTake.ACQUIRED
    assert await storage.gate_acquire(gates[1][0], run_id, limit=2, ttl=30) is GateTake.ACQUIRED
    return gates


async def test_the_gates_are_dropped_with_the_write(storage: Storage) -> None:
    run_id = await new_run(storage, events=[b"created"])
    gates = await _gated(storage, run_id)
    assert await _final(storage, run_id, gates) is None
    for key, _ in gates:
        assert await storage.gate_holders(key) == []
        assert await storage.gate_acquire(key, "next", limit=1, ttl=30) is GateTake.ACQUIRED


async def test_a_refused_write_drops_no_gate(storage: Storage) -> None:
    """The request it refuses may start a rollback, which the run's gates must still cover."""
    run_id = await new_run(storage, events=[b"created"])
    gates = await _gated(storage, run_id)
    assert await storage.request_control(run_id, b"fail")
    assert await _final(storage, run_id, gates) == b"fail"
    for key, holder in gates:
        assert await storage.gate_holders(key) == [holder]
    assert await storage.gate_acquire(gates[0][0], "next", limit=1, ttl=30) is GateTake.BUSY


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
