"""The Dramatiq side of reactorflow's jobs: the actors' bodies are the runtime's
(`reactorflow.runtime.services.job_handling`); what is Dramatiq's own is giving up on a job
after its retries.

Dramatiq retries a job on infrastructure errors only (step code is handled by the executor);
when those retries run out, `retries_exhausted` marks the run failed and publishes its
completion. `PermanentFailure` is never retried.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any

from dramatiq.asyncio import get_event_loop_thread

from reactorflow.runtime.engine.async_units import report
from reactorflow.runtime.engine.job_queue import Job, deferring, send
from reactorflow.runtime.services import job_handling as jobs
from reactorflow.runtime.services.job_handling import PermanentFailure, give_up, job_context

__all__ = ["PermanentFailure", "execute_element", "execute_run", "execute_undo", "execute_unit",
           "report", "retries_exhausted"]


async def execute_run(run_id: str, reactor: str, snoozes: int = 0,
                      headers: Mapping[str, str] | None = None, version: int = 1,
                      refused: float = 0.0) -> None:
    """The run actor: `jobs.execute_run` in the context its message's headers carry
    (`version`, `refused`: keywords only when not their defaults, so a message of a run of
    version 1 reads as before versions)."""
    with job_context(headers):
        await jobs.execute_run(run_id, reactor, snoozes, version=version, refused=refused)


async def execute_unit(run_id: str, reactor: str, key: str,
                       headers: Mapping[str, str] | None = None, snoozes: int = 0,
                       version: int = 1, refused: float = 0.0) -> None:
    """The async-unit actor: `jobs.execute_unit` in its message's context."""
    with job_context(headers):
        await jobs.execute_unit(run_id, reactor, key, snoozes, version=version,
                                refused=refused)


def execute_element(run_id: str, reactor: str, key: str, index: int,
                    headers: Mapping[str, str] | None = None, version: int = 1,
                    refused: float = 0.0, count: int = 1) -> None:
    """The map-element actor (`count` consecutive elements from `index`: a chunk):
    `jobs.execute_element` in its message's context, on the event loop thread; the jobs it
    enqueues are sent from this worker thread (`_off_the_loop`)."""

    async def body() -> None:
        with job_context(headers):
            await jobs.execute_element(run_id, reactor, key, index, version=version,
                                       refused=refused, count=count)

    _off_the_loop(body())


async def execute_undo(run_id: str, reactor: str, key: str, index: int,
                       headers: Mapping[str, str] | None = None, version: int = 1,
                       refused: float = 0.0) -> None:
    """The element-undo actor: `jobs.execute_undo` in its message's context (on the loop: it
    sends the throw's next undo before it calls its own handler)."""
    with job_context(headers):
        await jobs.execute_undo(run_id, reactor, key, index, version=version,
                                refused=refused)


def _off_the_loop(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` on the worker's event loop thread (Dramatiq's AsyncIO middleware), then send
    the jobs it enqueued from this worker thread: a broker's send blocks on its round trip,
    and on the loop it would hold up every other job's coroutine meanwhile.

    Raises:
        RuntimeError: the event loop thread is not running (no AsyncIO middleware).
    """
    loop_thread = get_event_loop_thread()
    if loop_thread is None:
        raise RuntimeError("reactorflow's worker has no event loop thread: its broker needs "
                           "Dramatiq's AsyncIO middleware")
    pending, error = loop_thread.run_coroutine(deferring(work))
    send(pending)
    if error is not None:
        raise error


async def retries_exhausted(message: dict[str, Any], info: dict[str, Any]) -> None:
    """Dramatiq gave up on a job after infrastructure errors: fail its run (or its unit) with
    the reason, and publish it (a malformed or forged job's arguments are checked there, not
    converted here: such a job is dropped)."""
    args = list(message.get("args") or [])
    traceback = str(message.get("options", {}).get("traceback", "")).strip().splitlines()
    reason = (f"the worker job failed {info.get('retries', '?')} time(s) on infrastructure errors"
              f"{': ' + traceback[-1] if traceback else ''}")
    version = (message.get("kwargs") or {}).get("version", 1)
    if message.get("actor_name") == "reactorflow.execute_unit" and len(args) >= 3:
        run_id, reactor, key = (str(a) for a in args[:3])
        await give_up(Job.unit(run_id, reactor, key, version=version), reason)
    elif message.get("actor_name") == "reactorflow.execute_element" and len(args) >= 4:
        run_id, reactor, key = (str(a) for a in args[:3])
        count = (message.get("kwargs") or {}).get("count", 1)
        await give_up(Job.element(run_id, reactor, key, args[3], version=version, count=count),
                      reason)
    elif message.get("actor_name") == "reactorflow.execute_undo" and len(args) >= 4:
        run_id, reactor, key = (str(a) for a in args[:3])
        await give_up(Job.undo(run_id, reactor, key, args[3], version=version), reason)
    elif len(args) >= 2:
        await give_up(Job.run(str(args[0]), str(args[1]), version=version), reason)
