"""The `reactorflow` command (also `python -m reactorflow`), built on Click.

Subcommands live in `runs` (reading and steering runs), `repair` (the `runs` commands that
repair a held run), `services` (worker, sweep, dashboard, demo), `schedules` (the scheduler,
schedules list/pause/resume), `versions` (`versions`, `deploy-check`, `runs migrate`),
`workers` (workers list), `subjects` (subjects forget|erasures), `keys` (keys rotate|check),
`bulk` (the bulk forms of `runs cancel|undo|retry|resume|retry-step`) and `graph`; `context`
resolves the app modules, the storage and a run's reactor;
`values` reads JSON and step names given on the line; `output` renders tables and JSON;
`settle` waits (`--wait`, `runs watch`); `phrasing` says refusals as commands. Errors are one
line on stderr with a non-zero exit status (1 an error, 2 a bad option, 3 a wait that timed
out, 130 Ctrl-C); `-v` anywhere on the command line shows the traceback (and INFO logs).
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Sequence

import click

from reactorflow import __version__
from reactorflow.cli import (
    bulk,
    graph,
    keys,
    repair,
    runs,
    schedules,
    services,
    subjects,
    versions,
    why,
    workers,
)
from reactorflow.cli.phrasing import one_line
from reactorflow.cli.settle import EXIT_TIMED_OUT
from reactorflow.errors import WaitTimeout
from reactorflow.runtime.ops.bulk import Action

VERBOSE_FLAGS = ("-v", "--verbose")
EXIT_ERROR = 1


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="reactorflow",
                      message="%(prog)s %(version)s")
@click.option("-v", "--verbose", is_flag=True,
              help="Show tracebacks and INFO logs (accepted anywhere on the line).")
def cli(verbose: bool) -> None:
    """Durable saga-style workflows on asyncio: inspect and steer runs, serve workers, the
    sweeper and the dashboard.

    Storage comes from REACTORFLOW_REDIS_URL (or --redis-url); commands that execute steps need
    the modules that declare your reactors (--app, repeatable, or REACTORFLOW_APP).
    """


runs.runs_group.add_command(why.why_command)
cli.add_command(runs.runs_group)
runs.runs_group.add_command(versions.migrate_command)
BULK_FORMS = {  # runs cancel|undo|retry|resume|retry-step: one RUN_ID, or filter options
    Action.CANCEL: (runs.cancel_command, "cancel (without rollback)"),
    Action.UNDO: (runs.undo_command, "roll back"),
    Action.RETRY: (runs.retry_command, "retry (a run retried before is not retried again)"),
    Action.RESUME: (repair.resume_command, "resume (operator-paused)"),
    Action.RETRY_STEP: (repair.retry_step_command, "run --step again of"),
}
for command in repair.COMMANDS:  # runs retry-step, skip-step, rewind, pause, resume
    runs.runs_group.add_command(command)
for action, (single, what) in BULK_FORMS.items():
    runs.runs_group.add_command(bulk.OneOrMany(single, bulk.bulk_command(
        action, bulk.BULK_HELP.format(what=what))))
cli.add_command(schedules.schedules_group)
cli.add_command(workers.workers_group)
cli.add_command(subjects.subjects_group)
cli.add_command(keys.keys_group)
for command in (runs.continue_command, runs.undo_command, runs.cancel_command,
                runs.retry_command, graph.graph_command, services.worker_command,
                services.sweep_command, services.dashboard_command, services.demo_command,
                schedules.scheduler_command, versions.versions_command,
                versions.deploy_check_command):
    cli.add_command(command)


def split_verbose(argv: Sequence[str]) -> tuple[list[str], bool]:
    """`argv` without `-v`/`--verbose` (before any `--`), and whether one was there."""
    rest: list[str] = []
    verbose = False
    for index, arg in enumerate(argv):
        if arg == "--":
            rest += argv[index:]
            break
        if arg in VERBOSE_FLAGS:
            verbose = True
        else:
            rest.append(arg)
    return rest, verbose


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (errors are one line unless `-v`)."""
    args, verbose = split_verbose(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s")
    try:
        result = cli.main(args, prog_name="reactorflow", standalone_mode=False,
                          obj={"verbose": verbose})
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except WaitTimeout as exc:  # --wait, `runs watch`: no failure, so no traceback to offer
        if verbose:
            traceback.print_exc()
        click.echo(f"error: {one_line(exc)}", err=True)
        return EXIT_TIMED_OUT
    except Exception as exc:  # every error becomes one line (or a traceback with -v)
        if verbose:
            traceback.print_exc()
        click.echo(f"error: {one_line(exc)}", err=True)
        if not verbose:
            click.echo("(run again with -v for the traceback)", err=True)
        return EXIT_ERROR
    return result if isinstance(result, int) else 0
