"""Waiting for a gate: try, and while busy wait for the gate's channel (a release, a turn passed
on) up to a deadline, re-trying once per notification.

Pub/sub is how a waiter learns that a place freed; a re-check every `RECHECK` seconds covers
what sends no notification (a crashed holder's TTL running out, a poison pill's timeout).
Rate-limit windows free by time alone: a refused caller sleeps until the window it needs ends.
An ordered lock's turn held by a run that has ended (its leave was lost) is passed over by the
next ticket that asks (`pass_ended_turn`), not at the lock's poison-pill timeout.
"""

from __future__ import annotations

import logging
import random
import re

import anyio

from reactorflow import clock
from reactorflow.status import Status
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import GateTake, RunCreation

RECHECK = 1.0
"""Seconds between re-checks of a busy gate while waiting for its notification."""
ENDED_TURN_QUIET = 1.0
"""Seconds an ended run's turn must have gone without a stamp before it is passed over (a run
that asked for its turn since it was read, a rewound one, is freshly stamped and kept)."""

log = logging.getLogger("reactorflow.gate")


async def take_place(storage: Storage, key: str, holder: str, *, limit: int, ttl: float,
                     wait: float, creates: RunCreation | None = None,
                     queue_for: float = 0.0) -> GateTake:
    """Take a place of gate `key`, waiting up to `wait` seconds; BUSY when none freed.

    With `wait` 0 and `queue_for`, a busy gate queues the holder for that long without
    waiting here (a parked rollback's handler: a release hands it the place, which its next
    try finds HELD).

    A waiter queues itself (`queue_for`) so that the release hands it the freed place: the
    release's notification names it, and it goes on without another round trip. With
    `creates` (the last gate its new run needs) it queues with its run, which the release
    creates when it hands it the place where the backend can: then the answer is CREATED
    (and `creates.stored` is set), and the caller goes straight to the run's first step. Any
    other notification makes it try again (it may have been handed the place in a
    notification that coalesced with a later one). Leaving without the place (its time is
    up, or it is cancelled) withdraws it from the queue (its run is then never created); a
    place handed over at that moment is kept when its time is up (with its run, if created),
    given back when it is cancelled (a run created with it is left to the caller, which
    sees `creates.stored`).
    """
    take = await storage.gate_acquire(key, holder, limit=limit, ttl=ttl,
                                      queue_for=queue_for if wait <= 0 else 0.0)
    if take is not GateTake.BUSY or wait <= 0:
        return take
    deadline = clock.monotonic() + wait
    mine = holder.encode("utf-8", "surrogatepass")
    created = mine + b"\0+"
    try:
        async with storage.subscribe_gate(key) as subscription:
            while (remaining := deadline - clock.monotonic()) > 0:
                take = await storage.gate_acquire(key, holder, limit=limit, ttl=ttl,
                                                  queue_for=remaining, creates=creates)
                if take is not GateTake.BUSY:
                    return _noted(take, creates)
                remaining = deadline - clock.monotonic()
                if (remaining > 0
                        and await clock.wait_signal(subscription.wait, min(remaining, RECHECK),
                                                    why=f"gate {key!r} (held)")):
                    if subscription.message == created:
                        return _noted(GateTake.CREATED, creates)
                    if subscription.message == mine:
                        return GateTake.ACQUIRED  # the release handed it the place
    except BaseException:
        with anyio.CancelScope(shield=True):
            took = await storage.gate_withdraw(key, holder)
            _noted(took, creates)
            if took is not GateTake.BUSY:
                await storage.gate_release(key, holder)
        raise
    took = _noted(await storage.gate_withdraw(key, holder), creates)
    return GateTake.ACQUIRED if took is GateTake.HELD else took


def _noted(take: GateTake, creates: RunCreation | None) -> GateTake:
    """`take`, having noted in `creates` that a hand-over created the run."""
    if take is GateTake.CREATED and creates is not None:
        creates.stored = True
    return take


async def take_turn(storage: Storage, key: str, ticket: str, *, poison_pill_timeout: float,
                    wait: float) -> bool:
    """Wait up to `wait` seconds for `ticket`'s turn in ordered lock `key` (entering the line
    first if it is not in it)."""
    turn = await storage.ordered_turn(key, ticket, poison_pill_timeout)
    if turn is None:
        await storage.ordered_enter(key, ticket)
        turn = await storage.ordered_turn(key, ticket, poison_pill_timeout)
    if not turn and await pass_ended_turn(storage, key, ticket):
        turn = await storage.ordered_turn(key, ticket, poison_pill_timeout)
    if turn or wait <= 0:
        return bool(turn)
    deadline = clock.monotonic() + wait
    # a look at the turn's run at most once per ENDED_TURN_QUIET: every hand-over wakes every
    # waiter, and those behind the new turn (freshly stamped) would each read it for nothing
    look_at = clock.monotonic() + ENDED_TURN_QUIET
    async with storage.subscribe_gate(key) as subscription:
        while True:
            turn = await storage.ordered_turn(key, ticket, poison_pill_timeout)
            if not turn and clock.monotonic() >= look_at:
                look_at = clock.monotonic() + ENDED_TURN_QUIET
                if await pass_ended_turn(storage, key, ticket):
                    turn = await storage.ordered_turn(key, ticket, poison_pill_timeout)
            remaining = deadline - clock.monotonic()
            if turn or remaining <= 0:
                return bool(turn)
            await clock.wait_signal(subscription.wait, min(remaining, RECHECK, poison_pill_timeout),
                                    why=f"its turn in ordered lock {key!r}")


_RUN_OF_TICKET = re.compile(r"[:|]")


async def pass_ended_turn(storage: Storage, key: str, ticket: str) -> bool:
    """Pass over the turn of ordered lock `key` when it is held by a run that has ended, or is
    gone (True: it was passed over; `ticket`, waiting, asks again).

    A run's place is finished by its `ordered_leave` as it ends; a failover that drops that
    acknowledged write (a Redis Cluster replica promoted before it had it), or a process
    that died between the run's end and its leave, leaves the ended run at the head of the
    line, where every later ticket would wait out the lock's `poison_pill_timeout`.

    1. Peek at the line: nothing to do when the turn is `ticket`'s or nobody's.
    2. Read the head of the turn's run (a ticket is a run id, or `<run id>|<step>` /
       `<run id>:<element>`): nothing to do while it is not ended.
    3. `Storage.ordered_pass`: the place is passed over only if it still has the turn and was
       not stamped for `ENDED_TURN_QUIET` seconds, atomically, so a run that went on since
       step 2 (it asked for its turn, renewing its stamp) keeps its place.
    """
    line = await storage.ordered_peek(key)
    if line.turn is None or line.turn == ticket:
        return False
    run_id = _RUN_OF_TICKET.split(line.turn, maxsplit=1)[0]
    head = await storage.load_head(run_id)
    if head is not None and not Status(head.status).is_ended:
        return False
    if not await storage.ordered_pass(key, line.turn, ENDED_TURN_QUIET):
        return False
    log.warning("reactorflow.gate.ended_turn_passed key=%s ticket=%s run_status=%s", key,
                line.turn, "gone" if head is None else head.status)
    return True


async def charge(storage: Storage, key: str, windows: list[tuple[int, int]], charge_id: str,
                 *, wait: float) -> float | None:
    """Charge a rate limit once for `charge_id`, sleeping until a window frees for up to `wait`
    seconds; None when admitted, else the seconds until a window frees."""
    deadline = clock.monotonic() + wait
    while True:
        retry_after = await storage.rate_charge(key, windows, charge_id)
        if retry_after is None:
            return None
        remaining = deadline - clock.monotonic()
        if remaining < retry_after:
            return retry_after
        # a little jitter after the boundary spreads the callers that all wait for it
        await clock.sleep(retry_after + random.random() * 0.001,
                          why=f"a free window of rate limit {key!r}")
