"""The gate primitives of `MemoryStorage` (the contract: `storage/contract/gates.py`).

Mixed into `MemoryStorage`: every method runs under its one mutex, so each is atomic. The clock
is `clock.now()`, as Redis's `TIME` is for `RedisStorage`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from reactorflow import clock
from reactorflow.storage.contract.values import GateTake, OrderedLine, RunCreation, Subscription

CHARGE_MEMORY = 86_400.0
"""Seconds a rate-limit charge is remembered at least (twice the longest window if longer)
after it was last asked for (a run asks again each time it tries its gates)."""


@dataclass(slots=True)
class _Line:
    seq: int = 0
    cursor: int = 0  # every number up to here is finished or passed over
    tickets: dict[str, int] = field(default_factory=dict)
    stamps: dict[int, float] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)  # finished numbers after the cursor


def advance(line: _Line) -> None:
    """Move the cursor over finished numbers (shared with the Redis scripts' algorithm)."""
    while line.cursor + 1 in line.done:
        line.cursor += 1
        line.done.discard(line.cursor)
        line.stamps.pop(line.cursor, None)


def place(line: _Line, ticket: str) -> int | None:
    """`ticket`'s number in `line`, a passed-over ticket's given up for a new one at the end
    (its place was passed over: it lost its turn and rejoins behind everyone in line); None
    when it is not in line."""
    number = line.tickets.get(ticket)
    if number is not None and passed_over(line, number):
        line.seq += 1
        number = line.tickets[ticket] = line.seq
    return number


def passed_over(line: _Line, number: int) -> bool:
    """Whether the number of a ticket still in line was passed over (the poison pill: the
    cursor moved past it, or it is marked finished after the cursor)."""
    return number <= line.cursor or number in line.done


class MemoryGates:
    """Gate holders, rate windows, period markers and ordered-lock lines, in memory."""

    _mutex: threading.Lock
    _subscription: Callable[[tuple[str, str]], AbstractAsyncContextManager[Subscription]]
    _subscribers: dict[tuple[str, str], set[Any]]
    _create_held: Callable[[RunCreation], bool]  # `create_run` under the mutex

    def _init_gates(self) -> None:
        self._holders: dict[str, dict[str, float]] = {}  # key -> holder -> expires
        # key -> queued holder -> (deadline, ttl, limit), in the order they joined
        self._queues: dict[str, dict[str, tuple[float, float, int]]] = {}
        # (key, queued holder) -> the run to create on hand-over, or None once created (until
        # its holder is told or releases the gate)
        self._creations: dict[tuple[str, str], RunCreation | None] = {}
        self._windows: dict[tuple[str, int], tuple[int, int]] = {}  # -> (bucket, count)
        self._charges: dict[tuple[str, str], float] = {}  # (key, charge) -> expires
        self._periods: dict[str, float] = {}
        self._lines: dict[str, _Line] = {}

    def _notify_gate(self, key: str, payloads: Sequence[bytes] = (b"1",)) -> None:
        with self._mutex:
            subs = list(self._subscribers.get(("\0gate", key), ()))
        for payload in payloads:
            for sub in subs:
                sub.notify(payload)

    def subscribe_gate(self, key: str) -> AbstractAsyncContextManager[Subscription]:
        return self._subscription(("\0gate", key))

    # -- holders -------------------------------------------------------------------------------

    def _live_holders(self, key: str, now: float) -> dict[str, float]:
        holders = self._holders.setdefault(key, {})
        for holder in [h for h, expires in holders.items() if expires <= now]:
            del holders[holder]
            self._creations.pop((key, holder), None)
        return holders

    async def gate_acquire(self, key: str, holder: str, *, limit: int, ttl: float,
                           queue_for: float = 0.0, creates: RunCreation | None = None,
                           ) -> GateTake:
        now = clock.now()
        with self._mutex:
            holders = self._live_holders(key, now)
            if holder in holders:
                holders[holder] = now + ttl
                if (key, holder) in self._creations and self._creations[key, holder] is None:
                    del self._creations[key, holder]
                    return GateTake.CREATED
                return GateTake.HELD
            if len(holders) >= limit:
                if queue_for > 0:
                    queue = self._queues.setdefault(key, {})
                    queue[holder] = (now + queue_for, ttl, limit)  # keeps its place if queued
                    if creates is not None:
                        self._creations[key, holder] = creates
                return GateTake.BUSY
            self._dequeue(key, holder)
            holders[holder] = now + ttl
            return GateTake.ACQUIRED

    def _dequeue(self, key: str, holder: str) -> None:
        self._creations.pop((key, holder), None)
        queue = self._queues.get(key)
        if queue is not None:
            queue.pop(holder, None)
            if not queue:
                del self._queues[key]

    async def gate_withdraw(self, key: str, holder: str) -> GateTake:
        now = clock.now()
        with self._mutex:
            created = (key, holder) in self._creations and self._creations[key, holder] is None
            self._dequeue(key, holder)
            if holder not in self._live_holders(key, now):
                return GateTake.BUSY
            return GateTake.CREATED if created else GateTake.HELD

    async def gate_release(self, key: str, holder: str) -> bool:
        return self._release_holder(key, holder)

    def _release_holder(self, key: str, holder: str) -> bool:
        """`gate_release`, also called by `save_state` for the places it drops: each freed place
        goes to the first live queued holder, creating the run it queued with (as
        `gate_release.lua` does)."""
        now = clock.now()
        handed: list[bytes] = []
        with self._mutex:
            holders = self._holders.get(key, {})
            released = holders.pop(holder, None) is not None
            if released:
                self._creations.pop((key, holder), None)
                holders = self._live_holders(key, now)
                queue = self._queues.get(key, {})
                for waiter, (deadline, ttl, limit) in list(queue.items()):
                    if deadline > now and len(holders) >= limit:
                        break
                    del queue[waiter]
                    creation = self._creations.pop((key, waiter), None)
                    if deadline > now:
                        holders[waiter] = now + ttl
                        name = waiter.encode("utf-8", "surrogatepass")
                        if creation is not None and self._create_held(creation):
                            self._creations[key, waiter] = None
                            name += b"\0+"
                        handed.append(name)
                if not queue:
                    self._queues.pop(key, None)
            if not holders:
                self._holders.pop(key, None)
        if released:
            self._notify_gate(key, handed or (b"1",))
        return released

    async def gate_extend(self, key: str, holder: str, ttl: float) -> bool:
        now = clock.now()
        with self._mutex:
            holders = self._live_holders(key, now)
            if holder not in holders:
                return False
            holders[holder] = now + ttl
            return True

    async def gate_holders(self, key: str) -> list[str]:
        with self._mutex:
            return list(self._live_holders(key, clock.now()))

    # -- rate limits and periods ---------------------------------------------------------------

    async def rate_charge(self, key: str, windows: Sequence[tuple[int, int]], charge: str,
                          ) -> float | None:
        now = clock.now()
        memory = max(CHARGE_MEMORY, 2.0 * max(seconds for seconds, _ in windows))
        with self._mutex:
            if self._charges.get((key, charge), 0.0) > now:
                self._charges[(key, charge)] = now + memory  # its run lives: asked again
                return None
            counts: list[tuple[tuple[str, int], int, int]] = []
            wait: float | None = None
            for seconds, limit in windows:
                bucket = math.floor(now / seconds)
                stored = self._windows.get((key, seconds))
                count = stored[1] if stored is not None and stored[0] == bucket else 0
                if count >= limit:
                    frees = (bucket + 1) * seconds - now
                    wait = frees if wait is None else max(wait, frees)
                counts.append(((key, seconds), bucket, count))
            if wait is not None:
                return wait
            for slot, bucket, count in counts:
                self._windows[slot] = (bucket, count + 1)
            self._charges[(key, charge)] = now + memory
            if len(self._charges) > 4096:
                for stale in [c for c, expires in self._charges.items() if expires <= now]:
                    del self._charges[stale]
            return None

    async def period_marked(self, key: str) -> bool:
        with self._mutex:
            return self._periods.get(key, 0.0) > clock.now()

    async def mark_period(self, key: str, ttl: float) -> bool:
        now = clock.now()
        with self._mutex:
            if self._periods.get(key, 0.0) > now:
                return False
            self._periods[key] = now + ttl
            return True

    # -- ordered locks -------------------------------------------------------------------------

    def _line(self, key: str) -> _Line | None:
        """The line of ordered lock `key`: kept while a ticket is in it (a run queued behind
        the lock waits however long, api.md §13), deleted once every place is finished."""
        return self._lines.get(key)

    async def ordered_enter(self, key: str, ticket: str) -> int:
        now = clock.now()
        with self._mutex:
            line = self._line(key) or self._lines.setdefault(key, _Line())
            number = place(line, ticket)
            if number is None:
                line.seq += 1
                number = line.tickets[ticket] = line.seq
            line.stamps[number] = now
            return number

    async def ordered_turn(self, key: str, ticket: str, poison_pill_timeout: float) -> bool | None:
        now = clock.now()
        with self._mutex:
            line = self._line(key)
            number = None if line is None else place(line, ticket)
            if line is None or number is None:
                return None
            line.stamps[number] = now  # its holder is alive: it asks
            while True:
                advance(line)
                first = line.cursor + 1
                if number <= first:
                    return True
                if now - line.stamps.get(first, 0.0) > poison_pill_timeout:
                    line.done.add(first)  # passed over: its holder stopped making progress
                    continue
                return False

    async def ordered_stamp(self, key: str, ticket: str) -> bool:
        now = clock.now()
        with self._mutex:
            line = self._line(key)
            number = None if line is None else line.tickets.get(ticket)
            if line is None or number is None or passed_over(line, number):
                return False  # not in line, or it lost its turn (its next ask rejoins)
            line.stamps[number] = now
            return True

    async def ordered_leave(self, key: str, ticket: str) -> bool:
        with self._mutex:
            line = self._line(key)
            number = None if line is None else line.tickets.pop(ticket, None)
            if line is None or number is None:
                return False
            if number > line.cursor:
                line.done.add(number)
            advance(line)
            if line.cursor >= line.seq and not line.tickets:
                del self._lines[key]  # drained: numbering starts again
        self._notify_gate(key)
        return True


    async def ordered_pass(self, key: str, ticket: str, quiet_for: float) -> bool:
        now = clock.now()
        with self._mutex:
            line = self._line(key)
            number = None if line is None else line.tickets.get(ticket)
            if line is None or number is None:
                return False
            advance(line)
            if number != line.cursor + 1 or now - line.stamps.get(number, 0.0) <= quiet_for:
                return False  # not its turn (or passed over already), or stamped since
            line.done.add(number)  # passed over: it rejoins at the end if it ever asks
        self._notify_gate(key)
        return True

    async def ordered_peek(self, key: str, ticket: str | None = None) -> OrderedLine:
        with self._mutex:
            line = self._line(key)
            if line is None:
                return OrderedLine(key)
            cursor = line.cursor
            while cursor + 1 in line.done:
                cursor += 1
            first = cursor + 1
            turn = next((t for t, n in line.tickets.items() if n == first), None)
            if turn is None:
                return OrderedLine(key)
            waiting = sum(1 for n in line.tickets.values() if n > first and n not in line.done)
            mine = line.tickets.get(ticket) if ticket is not None else None
            ahead = (None if mine is None or passed_over(line, mine) else
                     sum(1 for n in line.tickets.values()
                         if first <= n < mine and n not in line.done))
            return OrderedLine(key, turn, line.stamps.get(first), waiting, ahead)

    async def ordered_reset(self, key: str) -> int:
        with self._mutex:
            line = self._lines.pop(key, None)
        self._notify_gate(key)
        return 0 if line is None else len(line.tickets)
