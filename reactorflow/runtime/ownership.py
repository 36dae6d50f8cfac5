"""Owning a run: take its liveness lock, keep it alive, release it after the final save."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from reactorflow import clock
from reactorflow.runtime.lockkeeper import Hold, keeper
from reactorflow.storage.base import Storage

log = logging.getLogger("reactorflow.lock")


def new_owner() -> str:
    return secrets.token_hex(12)


async def acquire(storage: Storage, run_id: str, owner: str, ttl: float, wait: float) -> bool:
    """Take the run's lock, retrying with a short back-off for up to `wait` seconds."""
    deadline = clock.monotonic() + wait
    delay = 0.005
    while True:
        if await storage.acquire_lock(run_id, owner, ttl):
            return True
        if clock.monotonic() >= deadline:
            return False
        await clock.sleep(min(delay, max(0.0, deadline - clock.monotonic())))
        delay = min(delay * 2, 0.1)


@asynccontextmanager
async def keep_alive(storage: Storage, run_id: str, owner: str, ttl: float, *,
                     release: bool = True) -> AsyncIterator[Hold]:
    """Extend a lock already taken while the block runs; release it (once) afterwards, or with
    `release=False` stop extending it and let it expire (a lock that only guards work whose
    result is then stored: one round trip less)."""
    hold = keeper.hold(storage, run_id, owner, ttl)
    try:
        yield hold
    finally:
        keeper.release(hold)
        if release and not hold.released:  # else the final save released it already
            await _release(storage, run_id, owner)


async def _release(storage: Storage, run_id: str, owner: str) -> None:
    with anyio.CancelScope(shield=True):
        try:
            await storage.release_lock(run_id, owner)
        except Exception:
            log.warning("reactorflow.lock.release_failed run_id=%s (it will expire)", run_id,
                        exc_info=True)
