"""A worker's answer to a job for a version of its reactor it does not declare (api.md §14):
in a rolling deploy, old and new workers share one queue, and each takes on only the runs of
the versions it has.

Before a job's body runs (`admit`), in order:

1. The job's version is declared here, or its reactor is not declared at all (the body fails
   or drops it as before): the job goes on as it is.
2. Else the run's stored version decides (one head read): a run that moved since the job was
   sent (a migration) goes on with its version when that is declared here.
3. A run job whose stored version has a migration path here goes on: its body migrates the
   run under the run's lock (`migrations.on_version`). A unit, element or undo job never
   migrates its run (it does not own it): it asks the run's owner to (a run job) and is handed
   back.
4. Else the job is handed back to the queue, `HANDBACK_DELAY` (plus jitter) later, with the
   time of the first refusal (`Job.refused`): no retry is consumed and no worker spins. Once
   `version_patience` has passed since that first refusal, the run fails with
   `rf.DefinitionChanged` naming the version.
"""

from __future__ import annotations

import logging
import random

import msgspec

from reactorflow import clock, config, records
from reactorflow.definition import registry
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.job_queue import Job, JobKind
from reactorflow.runtime.ops import migrations, operations

log = logging.getLogger("reactorflow.worker")

HANDBACK_DELAY = 0.5
"""Seconds (plus up to as much jitter) before a handed-back job is delivered again."""


async def admit(job: Job) -> Job | None:
    """The job to act on (its version corrected when the run moved since it was sent), or
    None when it was handed back or its run failed for want of its version (see the module).

    Raises:
        StorageError: The storage failed (the queue retries the job).
    """
    name = job.reactor
    if registry.lookup(name, job.version) is not None or registry.lookup(name) is None:
        return job
    storage = config.current_storage()
    head = await storage.load_head(job.run_id)
    if head is None or head.reactor != name:
        return job  # a stray or forged job: its body says so, as before
    stored = records.meta_version(head.meta)
    if registry.lookup(name, stored) is not None:
        return msgspec.structs.replace(job, version=stored)
    if migrations.path(name, stored):
        if job.kind is JobKind.RUN:
            return msgspec.structs.replace(job, version=stored)
        queue.enqueue_run(job.run_id, name, version=stored)  # its owner migrates the run
    await hand_back(job, stored)
    return None


async def hand_back(job: Job, version: int) -> None:
    """Put `job` (of a run on `version`, which this worker neither declares nor migrates
    from) back on the queue for another worker, or, past the patience, fail its run (step 4
    of the module). Also for a job whose run moved, under its lock, to a version not here."""
    now = clock.now()
    refused = job.refused or now
    if now - refused >= config.settings().version_patience:
        error = migrations.unmigratable(job.run_id, job.reactor, version)
        if await operations.mark_unrecoverable(config.current_storage(), job.run_id,
                                               "DefinitionChanged", error.message):
            return  # (else its lock was busy: handed back again, to fail it then)
    queue.enqueue(msgspec.structs.replace(job, refused=refused, version=version),
                  delay=HANDBACK_DELAY * (1.0 + random.random()))
    if not job.refused:
        log.info("reactorflow.worker.handed_back run_id=%s reactor=%s version=%d kind=%s: "
                 "this worker declares version %s", job.run_id, job.reactor, version, job.kind,
                 ", ".join(map(str, registry.versions(job.reactor))))
