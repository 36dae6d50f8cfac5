"""A key rotation's compare-and-set of a run's records (`Storage.reseal_run`), on every backend:
all or none, refused when a record changed since it was read, never touching the status, the
lock or the history order."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reactorflow.storage.contract.resealing import Reseal
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import ClaimResult
from tests.conftest import ALL_BACKENDS, on_every
from tests.storage.test_contract import OWNER, new_run


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


async def _run(storage: Storage) -> str:
    run_id = await new_run(storage, meta=b"meta-old", state=b"state-old", events=[b"ev-0"])
    await storage.save_step(run_id, OWNER, "a", b"a-old", [b"ev-1", b"ev-2"])
    await storage.save_step(run_id, OWNER, "b", b"b-old")
    assert await storage.claim(run_id, "approve", b"p-old") is ClaimResult.ACCEPTED
    assert await storage.save_elements(run_id, "m", {0: b"e0-old", 1: b"e1-old"}) is not None
    return run_id


async def test_every_named_record_is_replaced_together(storage: Storage) -> None:
    run_id = await _run(storage)
    reseal = Reseal(head={"meta": (b"meta-old", b"meta-new"), "state": (b"state-old", b"st-new")},
                    steps={"a": (b"a-old", b"a-new")}, claims={"approve": (b"p-old", b"p-new")},
                    elements={"m": {1: (b"e1-old", b"e1-new")}},
                    events=[(b"ev-1", b"ev-1-new"), (b"dropped", b"x")])
    assert await storage.reseal_run(run_id, reseal) is True
    stored = await storage.load_run(run_id, history=True, claims=True)
    assert stored is not None
    assert (stored.head.meta, stored.head.state) == (b"meta-new", b"st-new")
    assert stored.head.status == "running"
    assert stored.steps == {"a": b"a-new", "b": b"b-old"}
    assert stored.claims == {"approve": b"p-new"}
    assert stored.history == [b"ev-0", b"ev-1-new", b"ev-2"]  # in place, in order
    assert await storage.load_elements(run_id, "m", 0, 2) == [b"e0-old", b"e1-new"]
    assert await storage.lock_owner(run_id) == OWNER  # the lock is not touched


@pytest.mark.parametrize("changed", ["head", "steps", "claims", "elements"])
async def test_a_record_changed_since_it_was_read_refuses_all(storage: Storage,
                                                              changed: str) -> None:
    run_id = await _run(storage)
    stale = {"head": {"state": (b"state-stale", b"x")}, "steps": {"b": (b"b-stale", b"x")},
             "claims": {"approve": (b"p-stale", b"x")},
             "elements": {"m": {0: (b"e0-stale", b"x")}}}
    swaps: dict[str, object] = {"head": {"meta": (b"meta-old", b"meta-new")},
                                "steps": {"a": (b"a-old", b"a-new")}}
    if changed in swaps:
        merged = dict(swaps[changed])  # type: ignore[call-overload]
        merged.update(stale[changed])
        swaps[changed] = merged
    else:
        swaps[changed] = stale[changed]
    reseal = Reseal(**swaps, events=[(b"ev-1", b"ev-1-new")])  # type: ignore[arg-type]
    assert await storage.reseal_run(run_id, reseal) is False
    stored = await storage.load_run(run_id, history=True, claims=True)
    assert stored is not None
    assert stored.head.meta == b"meta-old" and stored.steps["a"] == b"a-old"  # nothing written
    assert stored.history == [b"ev-0", b"ev-1", b"ev-2"]


async def test_a_run_that_wrote_meanwhile_keeps_its_write(storage: Storage) -> None:
    run_id = await _run(storage)
    await storage.save_step(run_id, OWNER, "a", b"a-written-by-the-run")
    assert await storage.reseal_run(run_id, Reseal(steps={"a": (b"a-old", b"a-new")})) is False
    assert await storage.load_step(run_id, "a") == b"a-written-by-the-run"


async def test_a_run_that_is_gone_is_refused(storage: Storage) -> None:
    assert await storage.reseal_run("no-such-run", Reseal(steps={"a": (b"x", b"y")})) is False
