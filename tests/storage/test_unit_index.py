"""The unit index on every backend: a dispatched unit is listed until it reports; a unit
marker whose save is refused (the writer lost the run) leaves nothing in the index."""

from __future__ import annotations

import pytest

from reactorflow.errors import LockLost
from reactorflow.storage.contract.storage import Storage
from tests.storage.test_contract import OTHER, OWNER, new_run


async def _listed(storage: Storage, run_id: str) -> list[str]:
    return [u.key for u in await storage.scan_units(1000) if u.run_id == run_id]


async def test_a_unit_is_listed_from_its_dispatch_until_it_reports(storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_step(run_id, OWNER, "mail", b"marker", [b"dispatched"], unit=True)
    assert await _listed(storage, run_id) == ["mail"]
    (unit,) = [u for u in await storage.scan_units(1000) if u.run_id == run_id]
    assert unit.lock_owner is None  # no worker holds "<run id>:mail"
    assert await storage.acquire_lock(f"{run_id}:mail", "worker-1", 10.0)
    (unit,) = [u for u in await storage.scan_units(1000) if u.run_id == run_id]
    assert unit.lock_owner == "worker-1"
    assert await storage.save_unit(run_id, "mail", b"done", [b"finished"]) is True
    assert await _listed(storage, run_id) == []


async def test_a_unit_parked_between_attempts_stays_listed_and_publishes_nothing(
        storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_step(run_id, OWNER, "mail", b"marker", [b"dispatched"], unit=True)
    async with storage.subscribe(run_id, "mail") as subscription:
        assert await storage.save_unit(run_id, "mail", b"attempt 1 failed", [b"retried"],
                                       settled=False) is True
        assert await subscription.wait(0.2) is False  # nothing settled: no one is told
    assert await storage.load_step(run_id, "mail") == b"attempt 1 failed"
    assert await _listed(storage, run_id) == ["mail"]  # a lost next job is still found
    assert await storage.save_unit(run_id, "mail", b"done", [b"finished"]) is True
    assert await _listed(storage, run_id) == []


async def test_a_refused_unit_marker_leaves_no_index_entry(storage: Storage) -> None:
    run_id = await new_run(storage)
    with pytest.raises(LockLost):
        await storage.save_step(run_id, OTHER, "mail", b"marker", [b"dispatched"], unit=True)
    assert await _listed(storage, run_id) == []
    stored = await storage.load_run(run_id)
    assert stored is not None and "mail" not in stored.steps
