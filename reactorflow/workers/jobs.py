"""The Dramatiq side of reactorflow's jobs: the actors' bodies are the runtime's
(`reactorflow.runtime.jobs`); what is Dramatiq's own is giving up on a job after its retries.

Dramatiq retries a job on infrastructure errors only (step code is handled by the executor);
when those retries run out, `retries_exhausted` marks the run failed and publishes its
completion. `PermanentFailure` is never retried.
"""

from __future__ import annotations

import time
from typing import Any

from reactorflow import config
from reactorflow.records import ErrorRecord, StepRecord
from reactorflow.runtime import operations
from reactorflow.runtime.execution import event
from reactorflow.runtime.jobs import PermanentFailure, execute_run, execute_unit
from reactorflow.runtime.units import report
from reactorflow.status import StepStatus

__all__ = ["PermanentFailure", "execute_run", "execute_unit", "report", "retries_exhausted"]


async def retries_exhausted(message: dict[str, Any], info: dict[str, Any]) -> None:
    """Dramatiq gave up on a job after infrastructure errors: fail its run, publish."""
    storage = config.current_storage()
    args = list(message.get("args") or [])
    traceback = str(message.get("options", {}).get("traceback", "")).strip().splitlines()
    reason = (f"the worker job failed {info.get('retries', '?')} time(s) on infrastructure errors"
              f"{': ' + traceback[-1] if traceback else ''}")
    if message.get("actor_name") == "reactorflow.execute_unit" and len(args) >= 3:
        run_id, _, key = args[:3]
        record = StepRecord(StepStatus.FAILED, 0, None, time.time(),
                            error=ErrorRecord("JobRetriesExhausted", reason))
        await report(storage, str(run_id), str(key), record, [event("step.failed", str(key))])
        return
    if args:
        await operations.mark_unrecoverable(storage, str(args[0]), "JobRetriesExhausted", reason)
