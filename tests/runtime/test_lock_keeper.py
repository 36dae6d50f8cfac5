"""The lock keeper's failure paths: a lock taken over by another owner is dropped (never
extended over the new owner), and an extension the storage cannot perform is retried soon
instead of dropping the hold."""

from __future__ import annotations

import logging

import anyio
import pytest

import reactorflow as rf
from reactorflow.runtime.lockkeeper import keeper
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
