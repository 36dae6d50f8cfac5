"""`reactorflow workers list`: the live worker processes, by their heartbeats."""

from __future__ import annotations

from datetime import datetime

import click

from reactorflow import clock
from reactorflow.cli.context import app_options, prepare, run_async
from reactorflow.cli.output import emit_json, table, when
from reactorflow.jsonforms import workers_form
from reactorflow.records import WorkerInfo
from reactorflow.runtime.services.heartbeats import list_workers


@click.group("workers")
def workers_group() -> None:
    """The worker processes serving the storage's queues."""


def ago(at: datetime, now: float) -> str:
    """How long ago `at` was, as "3 s ago" (whole seconds; never negative)."""
    return f"{max(0, round(now - at.timestamp()))} s ago"


def versions_text(info: WorkerInfo) -> str:
    """`name v1,2; other v1`, or "-" with no reactor loaded."""
    return "; ".join(f"{name} v{','.join(map(str, versions))}"
                     for name, versions in info.versions.items()) or "-"


@workers_group.command("list")
@app_options
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def list_command(apps: tuple[str, ...], redis_url: str | None, namespace: str | None,
                 as_json: bool) -> None:
    """Each live worker process (its heartbeat is younger than 3 heartbeat intervals): host,
    process id, queues, the reactor versions it declares, jobs in flight, when it started and
    when it was last seen."""
    prepare(apps, redis_url, namespace)
    found = run_async(list_workers)
    if as_json:
        emit_json(workers_form(found))
        return
    if not found:
        click.echo("no live workers (none sent a heartbeat within 3 heartbeat intervals)")
        return
    now = clock.now()
    table(["HOST", "PROCESS", "QUEUES", "VERSIONS", "JOBS", "STARTED", "LAST SEEN"],
          [[w.host, str(w.process), ",".join(w.queues) or "-",
            versions_text(w), str(w.jobs_in_flight), when(w.started_at.timestamp()),
            ago(w.last_seen, now)] for w in found])
