"""`MemoryStorage`: the complete in-process backend (the embedded default).

It stores encoded bytes exactly as Redis would, so serialization bugs surface here too. One
`threading.Lock` makes every method atomic; it is safe to share between threads and event loops.

Memory is bounded two ways: by age (`retention`, like Redis: it applies to ended runs only, from
the write that ended them; see `Storage`) and by count: at most `max_terminal_runs` ended runs
are kept, the one that ended first is evicted first. A running, paused, rolling-back or aborted
run (its undo still owed) never expires and is never evicted for room.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from reactorflow import clock
from reactorflow.errors import LockLost, RunRecordGone
from reactorflow.status import ENDED
from reactorflow.storage.contract.cursors import decode_cursor, encode_cursor
from reactorflow.storage.contract.method_marks import foldable, inline
from reactorflow.storage.contract.rotation import window
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import (
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_RETENTION,
    ClaimResult,
    Liveness,
    ResumeCheck,
    Resumption,
    RunCreation,
    RunHead,
    RunKey,
    RunPageData,
    StoredRun,
    Subscription,
    UnitLiveness,
    check_count,
)
from reactorflow.storage.memory.gates import MemoryGates
from reactorflow.storage.memory.maps import MemoryMaps
from reactorflow.storage.memory.records import LIVE, _Lock, _Run
from reactorflow.storage.memory.resealing import MemoryResealing
from reactorflow.storage.memory.schedules import MemorySchedules
from reactorflow.storage.memory.subjects import MemorySubjects
from reactorflow.storage.memory.timers import MemoryTimers
from reactorflow.storage.memory.workers import MemoryWorkers

_RESUMABLE = frozenset({"paused", "running"})
DEFAULT_MAX_TERMINAL_RUNS = 10_000
"""Ended runs a `MemoryStorage` keeps by default (about 3 KB each for a small run)."""
class _MemorySubscription(Subscription):
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()

    def notify(self, message: bytes) -> None:
        self.message = message
        with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(self.event.set)

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
        except TimeoutError:
            return False
        self.event.clear()
        return True


class MemoryStorage(MemoryMaps, MemoryGates, MemorySchedules, MemoryTimers, MemoryWorkers,
                    MemorySubjects, MemoryResealing, Storage):
    """Everything in this process's memory; lost when the process exits."""

    def __init__(self, *, retention: float = DEFAULT_RETENTION,
                 history_limit: int = DEFAULT_HISTORY_LIMIT,
                 max_terminal_runs: int = DEFAULT_MAX_TERMINAL_RUNS) -> None:
        """A fresh, empty storage.

        Args:
            retention: seconds an ended run (completed, failed, halted, cancelled) is kept
                after the write that ended it (7 days by default); a run in any other status
                never expires.
            history_limit: events kept per run, the newest (1000 by default).
            max_terminal_runs: ended runs kept at most (10,000 by default); past that, the run
                that ended first is evicted. Running, paused, rolling-back and aborted runs are
                never evicted for room.

        Raises:
            ConfigurationError: a value out of range; the message names the parameter.
        """
        super().__init__(retention=retention, history_limit=history_limit)
        self.max_terminal_runs = check_count("MemoryStorage", "max_terminal_runs",
                                             max_terminal_runs)
        self._ended: OrderedDict[str, None] = OrderedDict()  # ended first, first
        self._mutex = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._locks: dict[str, _Lock] = {}
        self._by_reactor: dict[str, dict[str, float]] = {}
        self._correlations: dict[tuple[str, str], tuple[str, float]] = {}
        # (reactor, correlation id) -> (the ended run it led to, when that run expires)
        self._past_correlations: dict[tuple[str, str], tuple[str, float]] = {}
        self._idempotency: dict[tuple[str, str], tuple[str, float]] = {}
        self._subscribers: dict[tuple[str, str], set[_MemorySubscription]] = {}
        self._init_gates()
        self._init_schedules()
        self._init_timers()
        self._init_workers()
        self._init_subjects()
        self._units: dict[tuple[str, str], float] = {}
        self._ops = 0

    # -- helpers (call with the mutex held) ----------------------------------------------------

    def _live(self, run_id: str, now: float) -> _Run | None:
        run = self._runs.get(run_id)
        if run is not None and run.expires <= now:
            self._drop(run)
            return None
        return run

    def _drop(self, run: _Run) -> None:
        self._ended.pop(run.run_id, None)
        self._runs.pop(run.run_id, None)
        self._locks.pop(run.run_id, None)
        self._by_reactor.get(run.reactor, {}).pop(run.run_id, None)
        self._drop_subject_run(run.run_id)
        if self._holds_claim(run) and run.idempotency is not None:
            del self._idempotency[run.idempotency]

    def _set_status(self, run: _Run, status: str, now: float) -> None:
        """Record `run`'s status and its expiry, the retention rule (api.md §13): an ended run
        expires `retention` after this write, any other never; so does the idempotency claim it
        holds. Past `max_terminal_runs` ended runs, evict the one that ended first."""
        run.status = status
        if status not in ENDED:
            run.expires = LIVE
            self._ended.pop(run.run_id, None)
            self._follow_claim(run)
            return
        run.expires = now + self.retention
        self._follow_claim(run)
        self._ended[run.run_id] = None
        self._ended.move_to_end(run.run_id)
        while len(self._ended) > self.max_terminal_runs:
            oldest = self._runs.get(next(iter(self._ended)))
            if oldest is None:
                self._ended.popitem(last=False)
            else:
                self._drop(oldest)

    def _holds_claim(self, run: _Run) -> bool:
        """Whether the idempotency claim `run` was created with still names it."""
        key = run.idempotency
        return key is not None and self._idempotency.get(key, ("", 0.0))[0] == run.run_id

    def _follow_claim(self, run: _Run) -> None:
        """The idempotency claim `run` holds takes the run's expiry."""
        if self._holds_claim(run) and run.idempotency is not None:
            self._idempotency[run.idempotency] = (run.run_id, run.expires)

    def _owner(self, run_id: str, now: float) -> _Lock | None:
        lock = self._locks.get(run_id)
        if lock is not None and lock.expires <= now:
            del self._locks[run_id]
            return None
        return lock

    def _fenced(self, run_id: str, owner: str, now: float) -> _Run:
        lock = self._locks.get(run_id)
        run = self._runs.get(run_id)
        if (lock is not None and lock.owner == owner and lock.expires > now
                and run is not None and run.expires > now):
            return run  # held and live: nothing expired to drop (the path of every write)
        lock = self._owner(run_id, now)
        run = self._live(run_id, now)
        if run is None:
            raise RunRecordGone(run_id, owner)
        if lock is None or lock.owner != owner:
            raise LockLost(run_id, owner)
        return run

    def _touch(self, run: _Run, now: float) -> None:
        run.touched_at = clock.now()
        self._ops += 1
        if self._ops % 1024 == 0:
            self._purge(now)

    def _purge(self, now: float) -> None:
        for run in [r for r in self._runs.values() if r.expires <= now]:
            self._drop(run)
        for lock_id in [k for k, lock in self._locks.items() if lock.expires <= now]:
            del self._locks[lock_id]
        for cid in [c for c, (_, exp) in self._correlations.items() if exp <= now]:
            del self._correlations[cid]
        for cid in [c for c, (_, exp) in self._past_correlations.items() if exp <= now]:
            del self._past_correlations[cid]
        for key in [k for k, (_, exp) in self._idempotency.items() if exp <= now]:
            del self._idempotency[key]

    # -- runs ----------------------------------------------------------------------------------

    async def create_run(self, run_id: str, *, reactor: str, status: str, meta: bytes,
                         state: bytes, created_at: float, owner: str, lock_ttl: float,
                         events: Sequence[bytes] = (), idempotency_key: str | None = None
                         ) -> bool:
        with self._mutex:
            return self._create_held(RunCreation(run_id, reactor, status, meta, state,
                                                 created_at, owner, lock_ttl, events,
                                                 idempotency_key))

    def _create_held(self, creation: RunCreation) -> bool:
        """`create_run` under the mutex (also a hand-over's: see `MemoryGates`)."""
        now = clock.monotonic()
        run_id = creation.run_id
        if self._live(run_id, now) is not None:
            return False
        lock = self._owner(run_id, now)
        if lock is not None and lock.owner != creation.owner:
            return False
        run = _Run(run_id, creation.reactor, creation.status, creation.meta, creation.state,
                   creation.created_at, clock.now(), LIVE,
                   deque(creation.events, maxlen=self.history_limit))
        if creation.idempotency_key is not None:
            run.idempotency = (creation.reactor, creation.idempotency_key)
        self._runs[run_id] = run
        self._set_status(run, creation.status, now)
        self._locks[run_id] = _Lock(creation.owner, 1, now + creation.lock_ttl)
        run.held = True
        self._by_reactor.setdefault(creation.reactor, {})[run_id] = creation.created_at
        self._touch(run, now)
        return True

    async def load_run(self, run_id: str, *, history: bool = False,
                       claims: bool = False) -> StoredRun | None:
        with self._mutex:
            return self._stored(run_id, clock.monotonic(), history, claims)

    async def load_runs(self, run_ids: Sequence[str], *, history: bool = False,
                        claims: bool = False) -> list[StoredRun | None]:
        now = clock.monotonic()
        with self._mutex:  # (every run of the batch in one hold: one snapshot)
            return [self._stored(run_id, now, history, claims) for run_id in run_ids]

    def _stored(self, run_id: str, now: float, history: bool, claims: bool
                ) -> StoredRun | None:
        """`load_run` under the mutex."""
        run = self._live(run_id, now)
        if run is None:
            return None
        return StoredRun(run.head(), dict(run.steps), list(run.history) if history else None,
                         dict(run.claims) if claims else None)

    async def load_head(self, run_id: str) -> RunHead | None:
        with self._mutex:
            run = self._live(run_id, clock.monotonic())
            return None if run is None else run.head()

    @inline
    @foldable
    async def save_step(self, run_id: str, owner: str, key: str, record: bytes,
                        events: Sequence[bytes] = (), *, unit: bool = False) -> bytes | None:
        now = clock.monotonic()
        with self._mutex:
            run = self._fenced(run_id, owner, now)
            run.steps[key] = record
            run.history.extend(events)
            self._touch(run, now)
            if unit:
                self._units.setdefault((run_id, key), clock.now())
            return run.control

    @inline
    async def save_steps(self, run_id: str, owner: str, steps: Mapping[str, bytes],
                         events: Sequence[bytes] = ()) -> bytes | None:
        """Fenced checkpoint of several steps in one write (the engine's batch of completions
        kept while its task did not suspend, `Execution.flush`): as `save_step` for each, in
        order, atomically.

        Args:
            run_id: The run's id.
            owner: The lock owner making the write.
            steps: Each step's key and encoded record.
            events: Encoded history events to append.

        Raises:
            LockLost: `owner` does not hold the run's lock (nothing was written).
        """
        now = clock.monotonic()
        with self._mutex:
            run = self._fenced(run_id, owner, now)
            run.steps.update(steps)
            run.history.extend(events)
            self._touch(run, now)
            return run.control

    async def load_step(self, run_id: str, key: str) -> bytes | None:
        with self._mutex:
            run = self._live(run_id, clock.monotonic())
            return None if run is None else run.steps.get(key)

    @inline
    async def save_state(self, run_id: str, owner: str, *, status: str, previous_status: str,
                         state: bytes, steps: Mapping[str, bytes] | None = None,
                         events: Sequence[bytes] = (), clear_control: bool = False,
                         publish: bool = False, release: bool = False,
                         gates: Sequence[tuple[str, str]] = (),
                         unless_control: bool = False) -> bytes | None:
        now = clock.monotonic()
        with self._mutex:
            run = self._fenced(run_id, owner, now)
            if unless_control and run.control is not None:
                return run.control
            if release:
                lock = self._locks[run_id]
                lock.count -= 1
                if lock.count <= 0:
                    del self._locks[run_id]
                    run.held = False
            self._set_status(run, status, now)
            run.state = state
            if steps:
                run.steps.update(steps)
            run.history.extend(events)
            if clear_control:
                run.control = None
            self._touch(run, now)
            control = run.control
        for key, holder in gates:  # once the write landed (no await between: atomic with it)
            self._release_holder(key, holder)
        if publish:
            self._notify(run_id, "", b"1")
        return control

    async def migrate_run(self, run_id: str, owner: str, *, expected_meta: bytes, meta: bytes,
                          state: bytes, steps: Mapping[str, bytes], removed: Sequence[str],
                          events: Sequence[bytes] = ()) -> bool:
        now = clock.monotonic()
        with self._mutex:
            run = self._fenced(run_id, owner, now)
            if run.meta != expected_meta:
                return False
            run.meta = meta
            run.state = state
            for key in removed:
                if key not in steps:
                    run.steps.pop(key, None)
            run.steps.update(steps)
            run.history.extend(events)
            self._touch(run, now)
        return True

    async def history(self, run_id: str) -> list[bytes]:
        with self._mutex:
            run = self._live(run_id, clock.monotonic())
            return [] if run is None else list(run.history)

    # -- liveness lock -------------------------------------------------------------------------

    async def acquire_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        now = clock.monotonic()
        with self._mutex:
            return self._take_lock(run_id, owner, ttl, now)

    def _take_lock(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        """`acquire_lock` under the mutex (held by the caller). A run's record notes that its
        lock is held until released (`Liveness.lapsed`)."""
        lock = self._owner(run_id, now)
        if lock is None:
            self._locks[run_id] = _Lock(owner, 1, now + ttl)
        elif lock.owner != owner:
            return False
        else:
            lock.count += 1
            lock.expires = now + ttl
        run = self._runs.get(run_id)
        if run is not None:
            run.held = True
        return True

    async def extend_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        now = clock.monotonic()
        with self._mutex:
            lock = self._owner(run_id, now)
            if lock is None or lock.owner != owner:
                return False
            lock.expires = now + ttl
            return True

    async def release_lock(self, run_id: str, owner: str) -> int:
        now = clock.monotonic()
        with self._mutex:
            lock = self._owner(run_id, now)
            if lock is None or lock.owner != owner:
                return -1
            lock.count -= 1
            if lock.count <= 0:
                del self._locks[run_id]
                self._released(run_id)
                return 0
            return lock.count

    def _released(self, run_id: str) -> None:
        """A run's lock was released (not lapsed): its record no longer notes it held."""
        run = self._runs.get(run_id)
        if run is not None:
            run.held = False

    async def lock_owner(self, run_id: str) -> str | None:
        with self._mutex:
            lock = self._owner(run_id, clock.monotonic())
            return None if lock is None else lock.owner

    # -- control, claims, counters -------------------------------------------------------------

    async def request_control(self, run_id: str, control: bytes) -> bool:
        now = clock.monotonic()
        with self._mutex:
            run = self._live(run_id, now)
            if run is None or run.control is not None:
                return False
            run.control = control
            return True

    async def claim(self, run_id: str, name: str, payload: bytes) -> ClaimResult:
        now = clock.monotonic()
        with self._mutex:
            run = self._live(run_id, now)
            if run is None:
                return ClaimResult.NOT_RESUMABLE
            if name in run.claims:
                return ClaimResult.TAKEN
            if run.status not in _RESUMABLE or run.control is not None:
                return ClaimResult.NOT_RESUMABLE
            run.claims[name] = payload
            return ClaimResult.ACCEPTED

    @inline
    async def claim_and_lock(self, run_id: str, name: str, payload: bytes, *, owner: str,
                             lock_ttl: float, then: Resumption | None = None,
                             check: ResumeCheck | None = None, events: Sequence[bytes] = (),
                             ) -> tuple[ClaimResult, StoredRun | None]:
        now = clock.monotonic()
        with self._mutex:
            run = self._live(run_id, now)
            if check is not None:
                if run is None:
                    return ClaimResult.REFUSED, None
                head = run.head()
                if not check.admits(head, name):
                    return ClaimResult.REFUSED, StoredRun(head, {})
                then = check.resumption(head, name)
            if run is None:
                return ClaimResult.NOT_RESUMABLE, None
            if name in run.claims:
                return ClaimResult.TAKEN, None
            if run.status not in _RESUMABLE or run.control is not None:
                return ClaimResult.NOT_RESUMABLE, None
            run.claims[name] = payload
            if not self._take_lock(run_id, owner, lock_ttl, now):
                run.history.extend(events)  # (the claim's own audit: the holder applies it)
                return ClaimResult.ACCEPTED, None
            if (then is not None and run.status == then.previous_status
                    and run.state == then.expected_state
                    and not any(k in run.claims for k in then.unclaimed)):
                self._set_status(run, then.status, now)
                run.state = then.state
                run.history.extend(then.events)
                self._touch(run, now)
            else:
                run.history.extend(events)
            return ClaimResult.ACCEPTED, self._stored(run_id, now, True, True)

    async def claims(self, run_id: str) -> dict[str, bytes]:
        with self._mutex:
            run = self._live(run_id, clock.monotonic())
            return {} if run is None else dict(run.claims)

    async def forget_claims(self, run_id: str, owner: str, names: Sequence[str]) -> None:
        now = clock.monotonic()
        with self._mutex:
            run = self._fenced(run_id, owner, now)
            for name in names:
                run.claims.pop(name, None)
                run.counters.pop(name, None)

    async def incr_counter(self, run_id: str, name: str) -> int:
        now = clock.monotonic()
        with self._mutex:
            run = self._live(run_id, now)
            if run is None:
                return 0
            run.counters[name] = run.counters.get(name, 0) + 1
            return run.counters[name]

    async def map_correlation(self, reactor: str, correlation_id: str, run_id: str) -> str:
        now = clock.monotonic()
        with self._mutex:
            current = self._correlations.get((reactor, correlation_id))
            if current is not None and current[1] > now and current[0] != run_id:
                return current[0]
            # never expires: it lives as long as its run waits (api.md §13); the run releases it
            self._correlations[(reactor, correlation_id)] = (run_id, LIVE)
            return run_id

    async def resolve_correlation(self, reactor: str, correlation_id: str) -> str | None:
        with self._mutex:
            current = self._correlations.get((reactor, correlation_id))
            if current is None or current[1] <= clock.monotonic():
                return None
            return current[0]

    async def release_correlation(self, reactor: str, correlation_id: str, run_id: str) -> bool:
        return _release_mapping(self._mutex, self._correlations, (reactor, correlation_id),
                                run_id)

    async def remember_correlation(self, reactor: str, correlation_id: str, run_id: str) -> None:
        with self._mutex:
            run = self._live(run_id, clock.monotonic())
            if run is not None and run.expires != LIVE:
                self._past_correlations[(reactor, correlation_id)] = (run_id, run.expires)

    async def claim_idempotency(self, reactor: str, key: str, run_id: str) -> str:
        now = clock.monotonic()
        with self._mutex:
            current = self._idempotency.get((reactor, key))
            if current is not None and current[1] > now:
                return current[0]
            # no expiry until its run ends (`_set_status`): it lives as long as the run
            self._idempotency[(reactor, key)] = (run_id, LIVE)
            return run_id

    async def release_idempotency(self, reactor: str, key: str, run_id: str) -> bool:
        return _release_mapping(self._mutex, self._idempotency, (reactor, key), run_id)

    async def find_by_key(self, kind: RunKey, key: str, reactor: str | None) -> dict[str, str]:
        match kind:
            case RunKey.CORRELATION_ID:
                mappings = self._correlations
            case RunKey.IDEMPOTENCY_KEY:
                mappings = self._idempotency
        past = self._past_correlations if kind is RunKey.CORRELATION_ID else {}
        now = clock.monotonic()
        with self._mutex:
            names = [reactor] if reactor is not None else sorted(self._by_reactor)
            found = {name: _current(mappings.get((name, key)), now)
                     or _current(past.get((name, key)), now) for name in names}
        return {name: run_id for name, run_id in found.items() if run_id is not None}

    # -- listing and sweeping ------------------------------------------------------------------

    async def list_runs(self, reactor: str | None, status: str | None, limit: int,
                        cursor: str | None, *, since: float | None = None,
                        until: float | None = None) -> RunPageData:
        now = clock.monotonic()
        after = decode_cursor(cursor)
        with self._mutex:
            indexes = (list(self._by_reactor.values()) if reactor is None
                       else [self._by_reactor.get(reactor, {})])
            entries = sorted((item for index in indexes for item in index.items()),
                             key=lambda item: (item[1], item[0]), reverse=True)
            heads: list[RunHead] = []
            for run_id, created in entries:
                if after is not None and (created, run_id) >= after:
                    continue
                if (until is not None and created >= until) or (
                        since is not None and created < since):
                    continue
                run = self._live(run_id, now)
                if run is None or (status is not None and run.status != status):
                    continue
                heads.append(run.head())
                if len(heads) > limit:
                    break
        more = len(heads) > limit
        heads = heads[:limit]
        next_cursor = encode_cursor(heads[-1].created_at, heads[-1].run_id) if more else None
        return RunPageData(heads, next_cursor)

    async def count_runs(self) -> dict[tuple[str, str], int]:
        now = clock.monotonic()
        counts: dict[tuple[str, str], int] = {}
        with self._mutex:
            for run_id in list(self._runs):
                run = self._live(run_id, now)
                if run is not None:
                    pair = (run.reactor, str(run.status))
                    counts[pair] = counts.get(pair, 0) + 1
        return counts

    async def scan_units(self, limit: int) -> list[UnitLiveness]:
        now = clock.monotonic()
        found: list[UnitLiveness] = []
        with self._mutex:
            for (run_id, key), since in sorted(self._units.items(), key=lambda item: item[1]):
                if self._live(run_id, now) is None:
                    del self._units[(run_id, key)]
                    continue
                lock = self._owner(f"{run_id}:{key}", now)
                found.append(UnitLiveness(run_id, key, since, None if lock is None else
                                          lock.owner))
                if len(found) >= limit:
                    break
        return found

    async def scan_status(self, statuses: Sequence[str], limit: int) -> list[Liveness]:
        now = clock.monotonic()
        wanted = set(statuses)
        with self._mutex:
            matching = [run for run in list(self._runs.values())
                        if run.status in wanted and self._live(run.run_id, now) is not None]
            found: list[Liveness] = []
            for run in window(matching, limit):  # from a random start when more match
                lock = self._owner(run.run_id, now)
                found.append(Liveness(run.run_id, run.reactor, run.status, run.touched_at,
                                      None if lock is None else lock.owner,
                                      lapsed=lock is None and run.held))
        return found

    async def scan_records(self, limit: int) -> list[Liveness]:
        # the index (`_by_reactor`) is written under the same mutex as the record, and
        # `scan_status` reads the records themselves: no run is ever missing from either
        return []

    async def repair_index(self, run_id: str) -> bool:
        return False  # (as `scan_records`: nothing to repair)

    async def save_unit(self, run_id: str, key: str, record: bytes,
                        events: Sequence[bytes] = (), *, settled: bool = True) -> bool:
        now = clock.monotonic()
        with self._mutex:
            run = self._live(run_id, now)
            if run is None:
                return False
            run.steps[key] = record
            run.history.extend(events)
            self._touch(run, now)
            if settled:
                self._units.pop((run_id, key), None)
        if settled:
            await self.publish(run_id, key, record)
        return True

    # -- notification --------------------------------------------------------------------------

    @asynccontextmanager
    async def _subscription(self, channel: tuple[str, str]) -> AsyncIterator[Subscription]:
        sub = _MemorySubscription()
        with self._mutex:
            self._subscribers.setdefault(channel, set()).add(sub)
        try:
            yield sub
        finally:
            with self._mutex:
                subs = self._subscribers.get(channel)
                if subs is not None:
                    subs.discard(sub)
                    if not subs:
                        del self._subscribers[channel]

    def subscribe(self, run_id: str, topic: str = "") -> AbstractAsyncContextManager[Subscription]:
        return self._subscription((run_id, topic))

    async def publish(self, run_id: str, topic: str = "", message: bytes = b"1") -> None:
        self._notify(run_id, topic, message)

    def _notify(self, run_id: str, topic: str, message: bytes) -> None:
        """`publish`, without suspending (the inline `save_state` calls it)."""
        with self._mutex:
            subs = list(self._subscribers.get((run_id, topic), ()))
        for sub in subs:
            sub.notify(message)

    def describe(self) -> str:
        return "MemoryStorage (in this process)"


def _release_mapping(mutex: threading.Lock, mappings: dict[tuple[str, str], tuple[str, float]],
                     key: tuple[str, str], run_id: str) -> bool:
    """Compare-and-delete of a first-wins mapping (expired mappings count as absent)."""
    with mutex:
        current = mappings.get(key)
        if current is None or current[0] != run_id or current[1] <= clock.monotonic():
            return False
        del mappings[key]
        return True


def _current(held: tuple[str, float] | None, now: float) -> str | None:
    """The run a (run id, expiry) mapping names while it has not expired."""
    return held[0] if held is not None and held[1] > now else None
