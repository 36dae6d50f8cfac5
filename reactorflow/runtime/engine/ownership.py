"""Owning a run: take its liveness lock, keep it alive, release it after the final save."""

from __future__ import annotations

import logging
import secrets
from types import TracebackType

import anyio

from reactorflow import clock
from reactorflow.runtime.engine.lockkeeper import Hold, keeper
from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.lock")


def new_owner() -> str:
    return secrets.token_hex(12)


OPERATOR_MARK = "op-"
"""How the lock owner token of an operator's action (`pause`, `resume`) begins: such a holder
reads no control request back, and lets go of the run within moments, so another operator's
action waits its turn for the lock instead of leaving a request behind (see `cancel`)."""


def operator_owner() -> str:
    """A lock owner token for an operator's action (see `OPERATOR_MARK`)."""
    return OPERATOR_MARK + new_owner()


def held_by_operator(owner: str | None) -> bool:
    """Whether the lock owner `owner` (None: no holder) is an operator's action."""
    return owner is not None and owner.startswith(OPERATOR_MARK)


async def acquire(storage: Storage, run_id: str, owner: str, ttl: float, wait: float) -> bool:
    """Take the run's lock, retrying with a short back-off for up to `wait` seconds.

    The lock is held by another execution, which lets go of it in real time: the retries are
    polls (`clock.poll`), and `wait` runs out in real time too on a fake clock (a job that
    waits for a run's lock never waits for a test to advance the clock)."""
    patience = clock.Patience(wait)
    delay = 0.005
    while True:
        if await storage.acquire_lock(run_id, owner, ttl):
            return True
        left = patience.remaining()
        if left <= 0:
            return False
        await clock.poll(min(delay, left))
        delay = min(delay * 2, 0.1)


def keep_alive(storage: Storage, run_id: str, owner: str, ttl: float, *,
               release: bool = True) -> KeepAlive:
    """Extend a lock already taken while the block runs; release it (once) afterwards, or with
    `release=False` stop extending it and let it expire (a lock that only guards work whose
    result is then stored: one round trip less). `async with keep_alive(...) as hold:`."""
    return KeepAlive(storage, run_id, owner, ttl, release)


class KeepAlive:
    """`keep_alive`'s context manager (a plain class: no generator per run)."""

    __slots__ = ("_hold", "_owner", "_release", "_run_id", "_storage", "_ttl")

    def __init__(self, storage: Storage, run_id: str, owner: str, ttl: float,
                 release: bool) -> None:
        self._storage, self._run_id, self._owner = storage, run_id, owner
        self._ttl, self._release = ttl, release
        self._hold: Hold | None = None

    async def __aenter__(self) -> Hold:
        self._hold = keeper.hold(self._storage, self._run_id, self._owner, self._ttl)
        return self._hold

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        hold = self._hold
        assert hold is not None
        keeper.release(hold)
        if self._release and not hold.released:  # else the final save released it already
            await _release(self._storage, self._run_id, self._owner)


async def _release(storage: Storage, run_id: str, owner: str) -> None:
    with anyio.CancelScope(shield=True):
        try:
            await storage.release_lock(run_id, owner)
        except Exception:
            log.warning("reactorflow.lock.release_failed run_id=%s (it will expire)", run_id,
                        exc_info=True)
