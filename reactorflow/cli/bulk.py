"""Bulk operations on the command line (api.md §16): `reactorflow runs cancel|undo|retry|resume|
retry-step` given filter options (`--reactor`, `--status`, `--since`, ...) instead of a RUN_ID
act on every run the filter selects. The same commands given a RUN_ID act on that one run, as
before (`OneOrMany` picks the form by the options on the line).

`--dry-run` prints the count and the first ids and writes nothing; without `--yes` the command
asks first; each run's outcome is printed as it comes (a counter on stderr when it is a
terminal); exit status 1 if any run refused, 2 for a bad selection.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from reactorflow.cli.context import app_options, prepare, run_async
from reactorflow.cli.output import clean, emit_json
from reactorflow.cli.runs import STATUSES, json_option
from reactorflow.errors import BulkSelectionError
from reactorflow.runtime.ops import bulk
from reactorflow.snapshot import RunSummary

SHOWN = 20
"""Ids a dry run lists in its human output (`--json` lists every run)."""
EXIT_REFUSED = 1
EXIT_BAD_SELECTION = 2
FILTERS = ("--reactor", "--status", "--since", "--until", "--error-type", "--version",
           "--correlation-id", "--idempotency-key", "--all")
"""The filter options; they, or `--dry-run`, select the bulk form of a command."""
BULK_ONLY = (*FILTERS, "--dry-run")


class OneOrMany(click.Command):
    """A command with two forms: `single` (given a RUN_ID) and `many` (given filter options,
    `FILTERS`): the options on the line choose which one parses and runs them."""

    def __init__(self, single: click.Command, many: click.Command) -> None:
        super().__init__(single.name, help=single.help, params=[],
                         short_help=single.short_help)
        self.single, self.many = copy.copy(single), many
        self.single.epilog = (
            f"With filter options ({', '.join(FILTERS)}) instead of RUN_ID it acts on every run "
            f"they select: 'reactorflow runs {single.name} --all --help' lists them.")

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        chosen = self.many if bulk_form(args) else self.single
        return chosen.make_context(info_name, args, parent=parent, **extra)


def bulk_form(args: Sequence[str]) -> bool:
    """Whether the line gives a filter option (the bulk form)."""
    for arg in args:
        if arg == "--":
            return False
        if arg.split("=", 1)[0] in BULK_ONLY:
            return True
    return False


def filter_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options of a bulk command's selection, and `--all`, `--dry-run`, `--yes`."""
    options = [
        click.option("--reactor", metavar="NAME", help="Only the runs of this reactor."),
        click.option("--status", type=click.Choice(STATUSES), help="Only runs in this status."),
        click.option("--since", metavar="AGE|TIME",
                     help="Only runs created at or after: an age (30m, 2h, 7d) or an ISO 8601 "
                          "time (UTC unless it has an offset)."),
        click.option("--until", metavar="AGE|TIME", help="Only runs created before this."),
        click.option("--error-type", metavar="TYPE",
                     help="Only runs whose error is of this type (its class name)."),
        click.option("--version", type=click.IntRange(min=1), metavar="N",
                     help="Only runs on this version of their reactor."),
        click.option("--correlation-id", metavar="ID",
                     help="Only the run this correlation id names."),
        click.option("--idempotency-key", metavar="KEY",
                     help="Only the run started with this idempotency key."),
        click.option("--all", "all_runs", is_flag=True,
                     help="Act on every stored run when no filter is given."),
        click.option("--dry-run", is_flag=True,
                     help="Print the count and the first ids: nothing is written."),
        click.option("--yes", is_flag=True, help="Do not ask for confirmation."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def bulk_command(action: bulk.Action, summary: str) -> click.Command:
    """The bulk form of `runs ACTION`."""

    def command(reactor: str | None, status: str | None, since: str | None,
                until: str | None, error_type: str | None, version: int | None,
                correlation_id: str | None, idempotency_key: str | None, all_runs: bool,
                dry_run: bool, yes: bool, as_json: bool, apps: tuple[str, ...],
                redis_url: str | None, namespace: str | None,
                step: str | None = None) -> None:
        try:
            chosen = bulk.selection(reactor=reactor, status=status, since=since, until=until,
                                    error_type=error_type, version=version,
                                    correlation_id=correlation_id,
                                    idempotency_key=idempotency_key, all_runs=all_runs)
            if action is bulk.Action.RETRY_STEP and not step:
                raise BulkSelectionError("retry-step needs the step to run again: --step STEP",
                                         field="step")
        except BulkSelectionError as exc:
            raise click.UsageError(str(exc)) from None
        prepare(apps, redis_url, namespace)
        runs: list[RunSummary] = run_async(lambda: bulk.select(chosen))
        if dry_run:
            show_dry_run(action, runs, as_json)
            return
        if not runs:
            if as_json:
                emit_json({"matched": 0, "runs": []})
            else:
                click.echo(f"no run matches: nothing to {action.value}")
            return
        if not yes and not click.confirm(
                f"{action.value.capitalize()} {len(runs)} run(s)?", err=True):
            click.echo(f"nothing was done ({action.value} of {len(runs)} run(s) declined)",
                       err=True)
            return
        outcomes = act(action, runs, step, as_json)
        refused = sum(1 for o in outcomes if not o.ok)
        if as_json:
            emit_json({"matched": len(runs), "runs": [o.form() for o in outcomes]})
        else:
            click.echo(f"runs {action.value}: {len(outcomes) - refused} ok, {refused} refused "
                       f"(of {len(runs)} matched)")
        click.get_current_context().exit(EXIT_REFUSED if refused else 0)

    command.__doc__ = summary
    made: Callable[..., Any] = filter_options(command)
    if action is bulk.Action.RETRY_STEP:
        made = click.option("--step", metavar="STEP",
                            help="The failed step to run again (a nested one as a/b).")(made)
    return click.command(action.value, help=summary)(json_option(app_options(made)))


def act(action: bulk.Action, runs: Sequence[RunSummary], step: str | None,
        as_json: bool) -> list[bulk.Outcome]:
    """Apply `action` to the runs, each outcome printed as it comes (in human output) and a
    counter on stderr when it is a terminal."""
    outcomes: list[bulk.Outcome] = []
    counter = sys.stderr.isatty()

    def report(outcome: bulk.Outcome) -> None:
        outcomes.append(outcome)
        if counter:
            click.echo("\r\x1b[K", err=True, nl=False)
        if not as_json:
            click.echo(clean(outcome_line(outcome)))
        if counter:
            click.echo(f"{len(outcomes):,}/{len(runs):,} done", err=True, nl=False)

    try:
        run_async(lambda: bulk.apply(action, runs, report, step=step))
    finally:
        if counter:
            click.echo("\r\x1b[K", err=True, nl=False)
    return outcomes


def outcome_line(outcome: bulk.Outcome) -> str:
    if not outcome.ok:
        reason = " ".join((outcome.error or "").split())
        return f"{outcome.id}  refused ({outcome.status}): {reason}"
    note = f" ({outcome.note})" if outcome.note else ""
    retried = (f" as {outcome.retried_as}" if outcome.retried_as and not outcome.note else "")
    return f"{outcome.id}  ok{retried}: {outcome.status}{note}"


def show_dry_run(action: bulk.Action, runs: Sequence[RunSummary], as_json: bool) -> None:
    if as_json:
        emit_json({"matched": len(runs), "dry_run": True,
                   "runs": [{"id": r.id, "ok": None, "status": r.status.value, "error": None}
                            for r in runs]})
        return
    click.echo(f"{len(runs)} run(s) match: {action.value} would act on each (dry run: "
               "nothing was written)")
    for run in runs[:SHOWN]:
        click.echo(clean(f"{run.id}  {run.reactor}  {run.status.value}"))
    if len(runs) > SHOWN:
        click.echo(f"... and {len(runs) - SHOWN} more (--json lists every run)")


BULK_HELP = ("Given filter options instead of a RUN_ID, {what} every run they select (--dry-run "
             "first to see them; --yes to skip the question; exit status 1 if any refused).")
