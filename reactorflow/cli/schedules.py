"""`reactorflow schedules list|pause|resume|run-now|backfill` and the `reactorflow scheduler`
daemon."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from reactorflow import config
from reactorflow.cli.context import app_options, prepare, run_async, run_until_stopped
from reactorflow.cli.output import show_run, table
from reactorflow.cli.settle import check_wait, settled, wait_options
from reactorflow.definition.schedules import MAX_CATCH_UP
from reactorflow.errors import StorageError
from reactorflow.jsonforms import dumps
from reactorflow.runtime.services import scheduler
from reactorflow.snapshot import Run

EXIT_SOME_REFUSED = 1


@click.group("schedules")
def schedules_group() -> None:
    """List, pause, resume, run now and backfill the schedules of the reactors in the --app
    modules."""


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


@schedules_group.command("run-now")
@click.argument("target", metavar="REACTOR[:NAME]")
@wait_options
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@app_options
def run_now_command(target: str, wait: bool, timeout: float | None, as_json: bool,
                    apps: tuple[str, ...], redis_url: str | None, namespace: str | None) -> None:
    """Start a run of the schedule REACTOR[:NAME] now, as a tick would: dispatched to a
    worker, with the inputs the schedule gives a tick at this moment.

    Each call starts one run (no tick's idempotency key); the schedule's own ticks, cursor and
    last run are left as they are. With --wait, print the run once it settled.
    """
    check_wait(wait, timeout)
    prepare(apps, redis_url, namespace)
    entry = scheduler.find(target)
    tick = datetime.fromtimestamp(round(scheduler.now()), UTC)

    async def go() -> Run:
        run = await scheduler.start_tick(entry, tick, keyed=False)
        return await settled(entry.reactor, run, wait, timeout)

    run = run_async(go)
    click.echo(f"schedule {entry.key}: started run {run.id} (inputs of a tick at "
               f"{tick.astimezone(entry.schedule.zone).isoformat()})", err=True)  # JSON: stdout
    show_run(run, as_json)


def _moment(text: str, option: str, entry: scheduler.Entry) -> datetime:
    """An ISO time given on the command line; without an offset, in the schedule's zone."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an ISO time (e.g. 2026-05-01T09:00, or "
                                 "2026-05-01T09:00+02:00)", param_hint=option) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=entry.schedule.zone)
    return moment


@schedules_group.command("backfill")
@click.argument("target", metavar="REACTOR[:NAME]")
@click.option("--from", "start", required=True, metavar="ISO",
              help="The first moment of the window (ticks at it are included); without an "
                   "offset, in the schedule's timezone.")
@click.option("--to", "end", required=True, metavar="ISO",
              help="The last moment of the window (included; not in the future).")
@app_options
def backfill_command(target: str, start: str, end: str, apps: tuple[str, ...],
                     redis_url: str | None, namespace: str | None) -> int:
    """Start one run per tick of the schedule REACTOR[:NAME] from --from to --to, as the
    scheduler would have (dispatched, with each tick's inputs).

    Each tick's run is started under the tick's idempotency key, the one the scheduler uses:
    a tick the scheduler (or an earlier backfill) already started is reported with its run,
    and no second run is started. A line per tick shows the progress. Exit status 1 when the
    inputs of some tick were refused (the others are started).
    """
    prepare(apps, redis_url, namespace)
    entry = scheduler.find(target)
    first, last = _moment(start, "--from", entry), _moment(end, "--to", entry)
    if last < first:
        raise click.BadParameter(f"{end!r} is before --from {start!r}", param_hint="--to")
    current = datetime.fromtimestamp(scheduler.now(), UTC)
    if last > current:
        raise click.BadParameter(
            f"{end!r} is in the future: backfill starts the runs of past ticks (the scheduler "
            "starts the others when they come)", param_hint="--to")
    ticks = list(entry.schedule.ticks(first - timedelta(microseconds=1), last))
    if len(ticks) > MAX_CATCH_UP:
        raise click.BadParameter(
            f"the window holds {len(ticks)} ticks, more than {MAX_CATCH_UP} at once: backfill "
            "it in shorter windows", param_hint="--from/--to")
    zone = entry.schedule.zone

    async def go() -> tuple[int, int, int]:
        started = existing = refused = 0
        for number, tick in enumerate(ticks, 1):
            where = f"[{number}/{len(ticks)}] {tick.astimezone(zone).isoformat()}"
            try:
                run = await scheduler.start_tick(entry, tick)
            except StorageError:
                raise
            except Exception as exc:  # the user's inputs or callable, a busy gate: reported
                refused += 1
                click.echo(f"{where}  refused: {type(exc).__name__}: {exc}")
                continue
            if run.replayed:
                existing += 1
                click.echo(f"{where}  exists   run {run.id} ({run.status.value})")
            else:
                started += 1
                click.echo(f"{where}  started  run {run.id}")
        return started, existing, refused

    started, existing, refused = run_async(go)
    click.echo(f"schedule {entry.key}: {len(ticks)} tick(s) from {first.isoformat()} to "
               f"{last.isoformat()}: {started} started, {existing} already started, "
               f"{refused} refused", err=True)
    return EXIT_SOME_REFUSED if refused else 0


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
