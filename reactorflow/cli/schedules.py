"""`reactorflow schedules list|pause|resume` and the `reactorflow scheduler` daemon."""

from __future__ import annotations

import click

from reactorflow import config
from reactorflow.cli.context import app_options, prepare, run_async, run_until_stopped
from reactorflow.cli.output import table
from reactorflow.jsonforms import dumps
from reactorflow.runtime.services import scheduler
from reactorflow.snapshot import Run


@click.group("schedules")
def schedules_group() -> None:
    """List, pause and resume the schedules of the reactors in the --app modules."""


@schedules_group.command("list")
@app_options
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def list_command(apps: tuple[str, ...], redis_url: str | None, namespace: str | None,
                 as_json: bool) -> None:
    """Each schedule: name, cron, timezone, next fire time, paused, last run, last error."""
    prepare(apps, redis_url, namespace)

    found = run_async(scheduler.listing)
    if as_json:
        click.echo(dumps(found).decode())
        return
    table(["SCHEDULE", "CRON", "TIMEZONE", "NEXT", "PAUSED", "LAST RUN", "ERROR"],
          [[str(r["schedule"]), str(r["cron"]), str(r["timezone"]), str(r["next"]),
            "yes" if r["paused"] else "no", str(r["last_run"] or "-"), str(r["error"] or "-")]
           for r in found])


def _set_paused(target: str, paused: bool, apps: tuple[str, ...], redis_url: str | None,
                namespace: str | None) -> None:
    prepare(apps, redis_url, namespace)
    entry = run_async(lambda: scheduler.set_paused(target, paused))
    click.echo(f"schedule {entry.key}: {'paused' if paused else 'resumed'}")


@schedules_group.command("pause")
@click.argument("target", metavar="REACTOR[:NAME]")
@app_options
def pause_command(target: str, apps: tuple[str, ...], redis_url: str | None,
                  namespace: str | None) -> None:
    """Pause the schedule REACTOR[:NAME] (NAME: its name or index; default the first)."""
    _set_paused(target, True, apps, redis_url, namespace)


@schedules_group.command("resume")
@click.argument("target", metavar="REACTOR[:NAME]")
@app_options
def resume_command(target: str, apps: tuple[str, ...], redis_url: str | None,
                   namespace: str | None) -> None:
    """Resume the schedule REACTOR[:NAME]; the ticks of the paused time are skipped."""
    _set_paused(target, False, apps, redis_url, namespace)


@click.command("scheduler")
@click.argument("positional", nargs=-1, metavar="[MODULE]...")
@click.option("--once", is_flag=True, help="Start what is due now and exit.")
@app_options
def scheduler_command(positional: tuple[str, ...], once: bool, apps: tuple[str, ...],
                      redis_url: str | None, namespace: str | None) -> int:
    """Start the scheduled runs of the reactors in MODULEs as their ticks come due.

    Sleeps until the next tick; any number of copies may run (each tick starts one run);
    storage outages are logged and retried. Needs shared storage. Ctrl-C or SIGTERM stops it.
    """
    prepare(apps, redis_url, namespace, positional)
    count = sum(1 for _ in scheduler.entries())
    click.echo(f"reactorflow scheduler: {count} schedule(s) on "
               f"{config.current_storage().describe()}", err=True)

    def report(started: list[Run]) -> None:
        for run in started:
            click.echo(f"scheduler: started {run.reactor} run {run.id}")

    async def loop() -> None:
        if once:
            report(await scheduler.schedule_once())
        else:
            await scheduler.run_forever(on_started=report)

    if run_until_stopped(loop):
        click.echo("scheduler: stopped", err=True)
    return 0
