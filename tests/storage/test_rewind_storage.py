"""What a rewind asks of storage, on every backend (the cluster lane too): `forget_claims` (its
interrupts wait again) and `clear_elements` (its maps run again from nothing), each fenced,
atomic and idempotent."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reactorflow.errors import LockLost
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ClaimResult
from tests.conftest import ALL_BACKENDS, on_every
from tests.storage.test_contract import OTHER, OWNER, new_run


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


async def _claimed(storage: Storage) -> str:
    run_id = await new_run(storage)
    assert await storage.claim(run_id, "approve", b"yes") is ClaimResult.ACCEPTED
    assert await storage.claim(run_id, "sign", b"ok") is ClaimResult.ACCEPTED
    assert await storage.incr_counter(run_id, "approve") == 1
    assert await storage.incr_counter(run_id, "approve") == 2
    return run_id


async def test_forget_claims_removes_the_named_claims_and_counters(storage: Storage) -> None:
    run_id = await _claimed(storage)
    await storage.forget_claims(run_id, OWNER, ["approve", "never-claimed"])
    assert await storage.claims(run_id) == {"sign": b"ok"}
    assert await storage.incr_counter(run_id, "approve") == 1  # counts from zero again
    assert await storage.claim(run_id, "approve", b"again") is ClaimResult.ACCEPTED
    assert await storage.claim(run_id, "approve", b"third") is ClaimResult.TAKEN
    await storage.forget_claims(run_id, OWNER, ["approve"])  # idempotent
    assert await storage.claims(run_id) == {"sign": b"ok"}


async def test_forget_claims_is_fenced(storage: Storage) -> None:
    run_id = await _claimed(storage)
    with pytest.raises(LockLost):
        await storage.forget_claims(run_id, OTHER, ["approve"])
    assert await storage.claims(run_id) == {"approve": b"yes", "sign": b"ok"}


async def test_clear_elements_removes_the_named_slot_maps_only(storage: Storage) -> None:
    run_id = await new_run(storage)
    await storage.save_elements(run_id, "double", {0: b"a", 1: b"b"})
    await storage.save_elements(run_id, "double#job", {0: b"args"})
    await storage.save_elements(run_id, "other", {0: b"kept"})
    with pytest.raises(LockLost):
        await storage.clear_elements(run_id, OTHER, ["double"])
    assert await storage.count_elements(run_id, "double") == 2
    await storage.clear_elements(run_id, OWNER, ["double", "double#job", "never-written"])
    await storage.clear_elements(run_id, OWNER, ["double"])  # idempotent
    assert await storage.count_elements(run_id, "double") == 0
    assert await storage.load_elements(run_id, "double#job", 0, 1) == [None]
    assert await storage.load_elements(run_id, "other", 0, 1) == [b"kept"]
