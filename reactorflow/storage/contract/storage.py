"""The storage contract every backend implements (and one contract test suite checks).

Backends store opaque bytes (the runtime encodes every record with msgspec). The contract is
written so that Redis can implement each method atomically in one round trip:

* **Runs** are split in parts so that checkpointing step N never rewrites steps 1..N-1: a head
  (reactor, status, `meta` written once, `state` written on status changes, `touched_at`), one
  record per step, and a bounded history list.
* **Fencing**: every write to a run after its creation names the writer's lock `owner` and is
  refused with `LockLost` (writing nothing) unless that owner holds the run's liveness lock.
* **Liveness lock**: re-entrant (owner + count) with a TTL; the holder extends it.
* **First-wins primitives**: interrupt claims, correlation ids, idempotency keys.
* **Notification**: `publish` is called after the durable write it announces; waiters subscribe
  first, then read, then wait with a fallback re-check (pub/sub is an optimisation).
* **Findable runs**: once `create_run` (or a status write: `save_state`, `claim_and_lock`)
  has returned *or raised*, the run as stored is findable by the sweeper: by `scan_status`
  (its index entry was written with the run), or else by `scan_records` (the write left a
  repair record in the run's own keys, or the pass finds the run from its record), which
  writes its index entries again. A backend whose index writes can be cut off from the run's
  write (Redis Cluster: other slots) must leave that repair record atomically with the run;
  `repair_index` redoes the entries of one run (an idempotent replay calls it). The same holds
  for an async unit's dispatch (`save_step(unit=True)`): once it returned or raised, a unit
  whose record was written is found by `scan_units`, or by it after `scan_records` wrote its
  unit index entry again. A write that is refused (`LockLost`) touches no index entry.

**Retention** (api.md §13: it never drops live work) applies to *ended* runs only
(`reactorflow.status.ENDED`: completed, failed, halted, cancelled). A run in any other status
(running, also through one step longer than the retention; paused; rolling_back; aborted, its
undo still owed; snoozing at a gate or queued behind an ordered lock) never expires, nor does
anything it owns: its head, steps, history, claims, counters, control request, map element
slots, correlation ids, idempotency claim (`claim_idempotency`) and timer, nor its ticket in an
ordered lock's line, however long it waits. The write that stores an ended status
(`create_run`, `save_state`, `claim_and_lock`'s status write, a gate's hand-over) starts the
retention of every part of the run: they expire `retention` seconds after it (element slots
take the run's expiry at their writes and in that same atomic write; correlation ids are
released when the run ends; its idempotency claim takes the run's expiry, see
`claim_idempotency`). A later write that stores a live status again (a retry, an undo) makes
them permanent again. Writes that store no status (`save_step`, `claim`, `request_control`,
`incr_counter`, `save_unit`, element writes) neither start nor extend a retention; what they
create takes the run's. The liveness lock keeps its own TTL. Index entries of an expired run
are hints that readers drop (`list_runs`, `scan_status` prune them, bounded per call).
Thread safety: one storage object may be used from several threads and event loops at once.

The contract is one class, `Storage`, assembled here from its parts, one module per concern
in this folder: runs (`runs.py`), liveness locks (`locks.py`), what other callers write into a
run: control requests, interrupt claims, counters (`claims.py`), correlation ids and idempotency
keys (`first_wins.py`), listing and sweeping (`indexes.py`), notification (`notification.py`),
map element slots (`maps.py`), gates (`gates.py`), schedules (`schedules.py`), timers
(`timers.py`), worker heartbeats (`workers.py`), data subjects (`subjects.py`) and a key rotation's
compare-and-set of a run's records (`resealing.py`); the values
they pass in `values.py`. Each method's docstring states its atomicity and fencing.
"""

from __future__ import annotations

import abc

from reactorflow.storage.contract.claims import ClaimsContract
from reactorflow.storage.contract.first_wins import FirstWinsContract
from reactorflow.storage.contract.gates import GatesContract
from reactorflow.storage.contract.indexes import IndexesContract
from reactorflow.storage.contract.maps import MapSlotsContract
from reactorflow.storage.contract.notification import NotificationContract
from reactorflow.storage.contract.resealing import ResealContract
from reactorflow.storage.contract.schedules import SchedulesContract
from reactorflow.storage.contract.subjects import SubjectsContract
from reactorflow.storage.contract.timers import TimersContract
from reactorflow.storage.contract.values import (
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_RETENTION,
    check_count,
    check_seconds,
)
from reactorflow.storage.contract.workers import WorkersContract


class Storage(ClaimsContract, FirstWinsContract, IndexesContract, NotificationContract,
              MapSlotsContract, GatesContract, SchedulesContract, TimersContract, WorkersContract,
              SubjectsContract, ResealContract, abc.ABC):
    """Abstract storage backend. Methods state their atomicity; all are safe to retry unless
    noted (a retried write is idempotent because it writes the same bytes). The runs and locks
    parts come in through `ClaimsContract`, whose `claim_and_lock` composes them."""

    retention: float = DEFAULT_RETENTION
    history_limit: int = DEFAULT_HISTORY_LIMIT

    def __init__(self, *, retention: float = DEFAULT_RETENTION,
                 history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        """Validate and keep the options every backend shares.

        Args:
            retention: seconds an ended run is kept after the write that ended it (finite,
                > 0); a run that has not ended is never dropped (see the module docstring).
            history_limit: events kept per run, the newest (a whole number >= 1).

        Raises:
            ConfigurationError: a value out of range; the message names the parameter.
        """
        backend = type(self).__name__
        self.retention = check_seconds(backend, "retention", retention)
        self.history_limit = check_count(backend, "history_limit", history_limit)

    # -- lifecycle -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Release connections held for the current event loop."""

    def describe(self) -> str:
        """A short description for logs and errors (never credentials)."""
        return type(self).__name__
