"""`rf.forget_subject`: erase a data subject ("crypto-shredding"), and `rf.list_erasures`.

The algorithm, in order:
1. The subject's digest (`digests.subject_digest`); its indexed runs are read
   (`Storage.subject_runs`) and each is checked against its stored meta (an index entry is a
   hint: only a run whose meta names the digest counts).
2. Each of those runs still in flight — running (a sleep, an async unit or a map out
   included), paused (at an interrupt or by an operator), held — is cancelled with the reason
   `"subject erased"`, as `reactor.cancel` does, while its values can still be read: a
   cancelled run runs no rollback (its undo could not read what is about to be erased), so
   nothing it did is undone. A run rolling back or aborted keeps its status: its undo, under
   way or owed, meets erased values and fails there. A run whose reactor this process does not
   declare gets a cancel request that the next execution of it honours.
3. The data key and the run index are destroyed in one atomic write
   (`Storage.destroy_subject`): from then on every value sealed under the key reads
   `"<erased>"`. The runs that write returns and step 1 did not see (started meanwhile, under
   the key just destroyed) are cancelled in turn, as in step 2.
4. An audit record without the subject's data (its digest, the time, the actor, how many
   runs, which were cancelled) is appended (`Storage.record_erasure`).

A subject with no data key (unknown, or erased already and not seen since) changes nothing
and returns 0. A new run of an erased subject creates a fresh data key.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from reactorflow import audit, clock, config, records
from reactorflow.definition import registry
from reactorflow.errors import LockTimeout, ReactorflowError, RunNotFound, RunStateError
from reactorflow.records import Control, Erasure
from reactorflow.runtime.ops.operations import cancel
from reactorflow.runtime.subjects.digests import subject_digest
from reactorflow.status import ControlKind, Status
from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.subjects")

ERASED_REASON = "subject erased"
"""The cancel reason of a run cancelled by its subject's erasure."""
IN_FLIGHT = frozenset({Status.RUNNING, Status.PAUSED, Status.HELD})
"""The statuses of a run an erasure cancels."""


async def forget_subject(subject: str, *, actor: str | None = None) -> int:
    """Erase a data subject: destroy its data key, so every stored value of its runs reads
    `"<erased>"` from now on (`rf.Run` snapshots, CLI, HTTP API, dashboard), and cancel its
    runs in flight with the reason `"subject erased"`. Runs that ended stay as they are, but
    for their values; nothing of other subjects changes. The erasure is recorded, without the
    subject's data, for audit (`rf.list_erasures()`). See
    [Protecting data](protecting-data.md#subjects-and-erasure).

    Args:
        subject: The subject as the reactor's `subject=` template renders it (a customer id,
            say); it is never stored, only its digest.
        actor: Who erases it, recorded in the audit record and on the cancelled runs' events
            (default: the actor in effect, else this process's `user@host`).

    Returns:
        The number of runs touched (0: the subject is unknown, or erased already).

    Raises:
        ReactorflowError: `subject` is not a non-empty `str`, or a bad `actor` (nothing
            changes).
        StorageError: The storage failed (run it again: it goes on where it stopped).
    """
    digest = subject_digest(subject)
    with audit.acting(audit.checked(actor, "forget_subject")):
        storage = config.current_storage()
        if await storage.subject_key(digest) is None:
            return 0
        runs = await _runs_of(storage, digest, await storage.subject_runs(digest))
        cancelled = [run_id for run_id, (reactor, version, status) in runs.items()
                     if status in IN_FLIGHT
                     and await _cancel(storage, run_id, reactor, version)]
        destroyed = await storage.destroy_subject(digest)
        if destroyed is None and not runs:
            return 0  # another erasure destroyed it meanwhile: it records itself
        late = await _runs_of(storage, digest, [r for r in destroyed or () if r not in runs])
        cancelled += [run_id for run_id, (reactor, version, status) in late.items()
                      if status in IN_FLIGHT and await _cancel(storage, run_id, reactor, version)]
        touched = len(runs) + len(late)
        await storage.record_erasure(records.encode_erasure(Erasure(
            digest, datetime.fromtimestamp(clock.now(), UTC), audit.who(), touched,
            tuple(cancelled))))
        log.info("reactorflow.subject.erased subject=%s runs=%d cancelled=%d", digest[:12],
                 touched, len(cancelled))
        return touched


async def list_erasures(limit: int = 100) -> list[Erasure]:
    """The newest erasures of data subjects (`rf.forget_subject`), newest first.

    Args:
        limit: How many at most (a whole number >= 1).

    Raises:
        ReactorflowError: `limit` is not a whole number >= 1.
        StorageError: The storage failed.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ReactorflowError(f"list_erasures(limit={limit!r}): limit must be a whole number "
                               ">= 1")
    found = await config.current_storage().erasures(limit)
    return [records.decode_erasure(raw) for raw in found]


async def _runs_of(storage: Storage, digest: str,
                   run_ids: list[str]) -> dict[str, tuple[str, int, Status]]:
    """The runs among `run_ids` stored with `digest` as their subject: id -> (reactor,
    version, status)."""
    found: dict[str, tuple[str, int, Status]] = {}
    for run_id, stored in zip(run_ids, await storage.load_runs(run_ids), strict=True):
        if stored is None:
            continue
        meta = records.decode_meta(stored.head.meta)
        if meta.subject == digest:
            found[run_id] = (stored.head.reactor, meta.version, Status(stored.head.status))
    return found


async def _cancel(storage: Storage, run_id: str, name: str, version: int) -> bool:
    """Cancel one run of the subject in flight; True when it is cancelled or will be (a
    request left for the execution that drives it)."""
    reactor = registry.lookup(name, version) or registry.lookup(name)
    if reactor is None:  # not declared here: whoever drives it next honours the request
        control = Control(ControlKind.CANCEL, ERASED_REASON, actor=audit.who())
        return await storage.request_control(run_id, records.encode(control))
    try:
        await cancel(reactor, run_id, reason=ERASED_REASON)
    except (RunStateError, RunNotFound):
        return False  # it ended (or began rolling back) meanwhile
    except LockTimeout:
        return True  # its request is left: the execution holding it honours it
    return True
