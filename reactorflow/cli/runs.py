"""Reading and steering runs: `runs list`, `runs show`, `runs watch`, `continue`, `undo`,
`cancel`, `retry`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from reactorflow import clock, pydantic_types
from reactorflow.cli.context import app_options, prepare, run_async
from reactorflow.cli.output import emit_json, label, show_event, show_page, show_run, status_text
from reactorflow.cli.phrasing import held_advice
from reactorflow.cli.settle import check_wait, settled, wait_options, watch
from reactorflow.cli.values import json_value, step_path
from reactorflow.errors import ReactorflowError
from reactorflow.runtime.ops import search
from reactorflow.runtime.ops.lookup import declared_reactor, get_run, list_runs
from reactorflow.runtime.ops.resume import check_continue

STATUSES = ("running", "paused", "completed", "failed", "rolling_back", "cancelled", "aborted",
            "halted", "held")  # rf.Status values (kept import-free so --help stays fast)

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group("runs")
def runs_group() -> None:
    """List and show stored runs."""


def _moment(ctx: click.Context, param: click.Parameter, text: str | None) -> datetime | None:
    """A `--since`/`--until`: a duration back from now (`2h`) or an ISO datetime with a zone."""
    if text is None:
        return None
    try:
        now = datetime.fromtimestamp(clock.now(), UTC)
        return search.parse_moment(f"--{param.name}", text, now)
    except ReactorflowError as exc:
        raise click.BadParameter(exc.message) from None


@runs_group.command("list")
@click.option("--reactor", metavar="NAME", help="Only the runs of this reactor.")
@click.option("--status", type=click.Choice(STATUSES), help="Only runs in this status.")
@click.option("--since", metavar="WHEN", callback=_moment,
              help="Only runs created since: a duration back (30m, 2h, 7d) or an ISO datetime.")
@click.option("--until", metavar="WHEN", callback=_moment,
              help="Only runs created before: a duration back (30m, 2h, 7d) or an ISO datetime.")
@click.option("--correlation-id", metavar="ID", help="Only the run this correlation id leads to.")
@click.option("--idempotency-key", metavar="KEY", help="Only the run started with this key.")
@click.option("--version", type=click.IntRange(min=1), help="Only runs on this version.")
@click.option("--error-type", metavar="TYPE", help="Only failed runs with this error type.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True,
              help="Runs per page.")
@click.option("--cursor", metavar="CURSOR", help="Continue from a previous page.")
@json_option
@app_options
def list_command(reactor: str | None, status: str | None, since: datetime | None,
                 until: datetime | None, correlation_id: str | None,
                 idempotency_key: str | None, version: int | None, error_type: str | None,
                 limit: int, cursor: str | None, as_json: bool, apps: tuple[str, ...],
                 redis_url: str | None, namespace: str | None) -> None:
    """List runs of every reactor, newest first (filters combine)."""
    prepare(apps, redis_url, namespace)
    page = run_async(lambda: list_runs(
        reactor=reactor, status=status, limit=limit, cursor=cursor, since=since, until=until,
        correlation_id=correlation_id, idempotency_key=idempotency_key, version=version,
        error_type=error_type))
    show_page(page, as_json)


@runs_group.command("show")
@click.argument("run_id")
@json_option
@app_options
def show_command(run_id: str, as_json: bool, apps: tuple[str, ...], redis_url: str | None,
                 namespace: str | None) -> None:
    """Show a run: its steps (status, attempts, durations), error and pending interrupts."""
    prepare(apps, redis_url, namespace)
    show_run(run_async(lambda: get_run(run_id)), as_json)


@runs_group.command("watch")
@click.argument("run_id")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Give up after this many seconds (exit status 3).")
@app_options
def watch_command(run_id: str, timeout: float | None, apps: tuple[str, ...],
                  redis_url: str | None, namespace: str | None) -> None:
    """Print a run's history as it is stored, until the run settles.

    It ends when the run is completed, failed, halted, cancelled or aborted, or paused waiting
    for an interrupt (exit status 0); after --timeout seconds it gives up (exit status 3).
    """
    prepare(apps, redis_url, namespace)
    run = run_async(lambda: watch(run_id, timeout, show_event))
    if run.status.value == "paused":
        waits = ", ".join(label(w) for w in run.waiting_on) or "an interrupt"
        click.echo(f"run {run.id} is {status_text('paused')}: it waits for {waits} "
                   f"('reactorflow continue {run.id} STEP --payload JSON' resumes it)")
        return
    note = f": {run.error}" if run.error is not None else ""
    if run.status.value == "held":
        note += f" ({held_advice(run.id, run.error.step if run.error else None)})"
    click.echo(f"run {run.id} is {status_text(run.status.value)}{note}")




@click.command("continue")
@click.argument("run_id")
@click.argument("step", metavar="STEP")
@click.option("--payload", required=True, metavar="JSON|@FILE",
              help="The payload as JSON, or @path of a JSON file.")
@click.option("--check", is_flag=True,
              help="Only check the run and the payload: send nothing, count no attempt.")
@wait_options
@json_option
@app_options
def continue_command(run_id: str, step: str, payload: str, check: bool, wait: bool,
                     timeout: float | None, as_json: bool, apps: tuple[str, ...],
                     redis_url: str | None, namespace: str | None) -> None:
    """Deliver PAYLOAD to interrupt STEP of a paused run (a nested one as a/b).

    An invalid payload counts one of the interrupt's attempts (max_attempts); with --check
    nothing is sent or counted. With --wait, a run resumed in the background (by a worker) is
    waited for until it settles.
    """
    check_wait(wait, timeout)
    if check and wait:
        raise click.UsageError("--check sends nothing, so there is nothing to --wait for")
    value = json_value(payload, "--payload")
    prepare(apps, redis_url, namespace)
    path = step_path(step)

    async def go() -> Any:
        reactor = await declared_reactor(run_id)
        if check:
            return await check_continue(reactor, run_id, step=path, payload=value)
        run = await reactor.continue_(run_id, step=path, payload=value)
        return await settled(reactor, run, wait, timeout)

    result = run_async(go)
    if not check:
        show_run(result, as_json)
    elif as_json:
        emit_json({"ok": True, "run_id": run_id, "step": path,
                   "payload": pydantic_types.to_builtins(result)})
    else:
        click.echo(f"ok: run {run_id} waits on {step} and accepts this payload (nothing was "
                   "sent; no attempt was counted)")


def _steering(name: str, summary: str) -> click.Command:
    @click.command(name, help=summary)
    @click.argument("run_id")
    @wait_options
    @json_option
    @app_options
    def command(run_id: str, wait: bool, timeout: float | None, as_json: bool,
                apps: tuple[str, ...], redis_url: str | None, namespace: str | None,
                reason: str = "") -> None:
        check_wait(wait, timeout)
        prepare(apps, redis_url, namespace)

        async def go() -> Any:
            reactor = await declared_reactor(run_id)
            if name == "cancel":
                run = await reactor.cancel(run_id, reason=reason)
            else:
                run = await getattr(reactor, name)(run_id)
            return await settled(reactor, run, wait, timeout)

        run = run_async(go)
        if name == "retry" and not as_json:
            click.echo(f"retried {run_id} as {run.id}", err=True)
        show_run(run, as_json)

    return command


WAIT_NOTE = " With --wait, print the run once it settled (or exit 3 after --timeout)."
undo_command = _steering(
    "undo", "Roll back every completed step of a run (it ends cancelled)." + WAIT_NOTE)
cancel_command = click.option(
    "--reason", default="", metavar="TEXT",
    help="Why: stored with the run (its cancel_reason).")(_steering(
        "cancel", "Stop a running or paused run without rollback (a run another process "
        "drives stops at its next step boundary)." + WAIT_NOTE))
retry_command = _steering(
    "retry", "Start a new run with the inputs of a failed, cancelled or aborted run."
    + WAIT_NOTE)
