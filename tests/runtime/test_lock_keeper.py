"""The lock keeper's failure paths: a lock taken over by another owner is dropped (never
extended over the new owner), and an extension the storage cannot perform is retried soon
instead of dropping the hold. It never mistakes its owner's own release for a lost lock (the
spurious `reactorflow.lock.lost` warnings seen under load): an extension that races the final
save, which releases the lock in the same write, or the release when a hold ends, is not a
loss."""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import pytest

import reactorflow as rf
from reactorflow.runtime.engine.lockkeeper import keeper
from reactorflow.runtime.engine.ownership import keep_alive, new_owner
from tests.helpers import closed_port, unique


async def _logged(caplog: pytest.LogCaptureFixture, text: str, times: int = 1) -> None:
    """Until the keeper (a thread of its own) has logged `text` `times` times."""
    with anyio.fail_after(30):
        while sum(text in r.getMessage() for r in caplog.records) < times:
            await anyio.sleep(0.02)


async def test_a_lock_taken_over_is_dropped_not_extended(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="reactorflow.lock")
    lock = unique("kept")
    assert await storage.acquire_lock(lock, "owner-a", 1.5)
    hold = keeper.hold(storage, lock, "owner-a", 1.5)
    try:
        assert await storage.release_lock(lock, "owner-a") == 0  # A's lock is gone...
        assert await storage.acquire_lock(lock, "owner-b", 60.0)  # ...and B holds it now
        await _logged(caplog, f"reactorflow.lock.lost run_id={lock} owner=owner-a")
        assert await storage.lock_owner(lock) == "owner-b"
        assert await storage.release_lock(lock, "owner-b") == 0  # B's count was never touched
    finally:
        keeper.release(hold)


async def test_an_extension_that_fails_is_retried_and_the_hold_kept(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="reactorflow.lock")
    unreachable = rf.RedisStorage.from_url(f"redis://127.0.0.1:{closed_port()}/0")
    lock = unique("unreachable")
    hold = keeper.hold(unreachable, lock, "owner-a", 0.6)
    try:
        # tried again and again: the hold was kept
        await _logged(caplog, f"reactorflow.lock.extend_failed run_id={lock}", times=2)
        lost = [r for r in caplog.records if f"reactorflow.lock.lost run_id={lock}" in
                r.getMessage()]
        assert lost == []  # an unreachable storage is not a lost lock
    finally:
        keeper.release(hold)
        await unreachable.aclose()


# -- an extension racing the owner's own release -----------------------------------------------

TTL = 0.3  # the keeper extends every TTL / 3


def _lost_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "reactorflow.lock.lost" in r.getMessage()]


async def _until_set(event: threading.Event, what: str) -> None:
    assert await anyio.to_thread.run_sync(event.wait, 10), f"timed out waiting for {what}"


async def test_an_extension_racing_the_final_save_is_not_a_lost_lock(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    rf.configure(lock_ttl=TTL)
    flow = rf.Reactor(unique("keeper"))

    @flow.step
    async def only() -> int:
        return 1

    released: set[str] = set()
    refused_after_release = threading.Event()
    real_save, real_extend = storage.save_state, storage.extend_lock

    async def extend_lock(run_id: str, owner: str, ttl: float) -> bool:  # the keeper's thread
        kept = await real_extend(run_id, owner, ttl)
        if run_id in released and not kept:
            refused_after_release.set()
        return kept

    async def save_state(run_id: str, owner: str, **kwargs: Any) -> bytes | None:
        control = await real_save(run_id, owner, **kwargs)
        if kwargs.get("release"):  # released in storage; the reply is still on its way...
            released.add(run_id)
            await _until_set(refused_after_release, "the keeper's next extension")
        return control

    storage.extend_lock = extend_lock  # type: ignore[method-assign]
    storage.save_state = save_state  # type: ignore[method-assign]
    with caplog.at_level(logging.DEBUG, logger="reactorflow.lock"):
        run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert refused_after_release.is_set()  # the race happened...
    assert _lost_warnings(caplog) == []  # ...and was not taken for a loss


async def test_an_extension_racing_the_release_at_the_end_of_a_hold_is_not_a_lost_lock(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    run_id, owner = "held-run", new_owner()
    assert await storage.create_run(run_id, reactor="r", status="running", meta=b"m",
                                    state=b"s", created_at=1.0, owner=owner, lock_ttl=TTL)
    extending, release_done = threading.Event(), threading.Event()
    real_extend, real_release = storage.extend_lock, storage.release_lock

    async def extend_lock(run_id: str, owner: str, ttl: float) -> bool:  # the keeper's thread
        extending.set()
        await anyio.to_thread.run_sync(release_done.wait, 10)  # a slow round trip
        return await real_extend(run_id, owner, ttl)

    async def release_lock(run_id: str, owner: str) -> int:
        left = await real_release(run_id, owner)
        release_done.set()
        return left

    storage.extend_lock = extend_lock  # type: ignore[method-assign]
    storage.release_lock = release_lock  # type: ignore[method-assign]
    with caplog.at_level(logging.DEBUG, logger="reactorflow.lock"):
        async with keep_alive(storage, run_id, owner, TTL):
            await _until_set(extending, "the keeper's extension")
        assert await storage.lock_owner(run_id) is None
        with anyio.fail_after(10):  # until the keeper has judged that extension
            while not any("extend_after_release" in r.getMessage() or
                          "reactorflow.lock.lost" in r.getMessage() for r in caplog.records):
                await anyio.sleep(0.01)
    assert _lost_warnings(caplog) == []
