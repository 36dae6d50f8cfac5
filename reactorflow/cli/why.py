"""`reactorflow runs why RUN_ID`: what a run waits on, and since when (`rf.explain`)."""

from __future__ import annotations

import click
import msgspec

from reactorflow import clock
from reactorflow.blockers import Blocker
from reactorflow.cli.context import app_options, prepare, run_async
from reactorflow.cli.notes import moment_utc, span, until
from reactorflow.cli.output import clean, emit_json
from reactorflow.runtime.ops.explain import explain, in_flight
from reactorflow.runtime.ops.lookup import get_run
from reactorflow.snapshot import Run
from reactorflow.status import Status, StepStatus


def blocker_line(blocker: Blocker, now: float) -> str:
    """One blocker as `runs why` prints it: kind, step, since when, until when, detail."""
    parts = [f"{blocker.kind.value:<13}"]
    if blocker.step:
        parts.append(f"step {blocker.step!r}")
    if blocker.since is not None:
        parts.append(f"since {moment_utc(blocker.since)} ({span(now - blocker.since.timestamp())}"
                     " ago)")
    parts.append(f"until {moment_utc(blocker.until)} ({until(blocker.until, now)})"
                 if blocker.until is not None else "until an operator or another run moves it")
    return clean("  ".join(parts) + f"\n    {blocker.detail}")


def nothing_line(run: Run, now: float) -> str:
    """What `runs why` says of a run with no blocker: ended, or moving (its steps in flight)."""
    status = Status(run.status)
    if status.is_terminal:
        return f"nothing: the run has ended ({status.value})"
    steps = in_flight(run)
    if not steps:  # (a plain step is checkpointed when it ends: none is seen in flight)
        done = sum(1 for state in run.steps.values() if state.status == StepStatus.COMPLETED)
        changed = clock.utc(run.updated_at)
        return (f"nothing: the run is moving ({status.value}; {done} of {len(run.steps)} "
                f"steps done; last change {moment_utc(changed)}, {span(now - run.updated_at)} "
                "ago)")
    shown = ", ".join(f"step {key!r} in flight since {moment_utc(since)} "
                      f"({span(now - since.timestamp())} ago)" if since is not None
                      else f"step {key!r} in flight" for key, since in steps)
    return clean(f"nothing: running: {shown}")


@click.command("why")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True,
              help="Print the blockers as a JSON list (empty: ended or moving).")
@app_options
def why_command(run_id: str, as_json: bool, apps: tuple[str, ...], redis_url: str | None,
                namespace: str | None) -> None:
    """Say what a run waits on and since when: an interrupt, a sleep, a gate and the run
    holding it, a rate limit, an ordered turn, a queue with no worker, a backoff, an async
    unit, a hold, a rollback, a stale owner; or that it is moving, or has ended."""
    prepare(apps, redis_url, namespace)

    async def read() -> tuple[list[Blocker], Run]:
        return await explain(run_id), await get_run(run_id)

    blockers, run = run_async(read)
    if as_json:
        emit_json(msgspec.to_builtins(blockers))
        return
    now = clock.now()
    click.echo(clean(f"run {run.id} ({run.reactor}, {Status(run.status).value}) waits on:"))
    if not blockers:
        click.echo(f"  {nothing_line(run, now)}")
    for blocker in blockers:
        click.echo(f"  {blocker_line(blocker, now)}")
