"""The commands around a deploy (api.md §14): `versions` (in-flight runs per stored version),
`deploy-check` (what the code of --app would do with each in-flight run) and `runs migrate`
(move the in-flight runs of one version onto the newest, ahead of time).

Their exit statuses are a gate's: 0 when all is well; 1 when the check found stranded runs
(`versions`, `deploy-check`, `runs migrate --dry-run`) or a migration was refused (`runs
migrate`); 2 when the check could not be made (a bad option, an unreachable storage, an app
module that cannot be imported: one line on stderr, never a traceback unless `-v`).
"""

from __future__ import annotations

import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import click

from reactorflow.cli.context import app_options, prepare, run_async
from reactorflow.cli.output import clean, emit_json, table
from reactorflow.cli.phrasing import one_line
from reactorflow.cli.runs import json_option
from reactorflow.definition import registry
from reactorflow.runtime.ops import inventory
from reactorflow.runtime.ops.inventory import MIGRATES, STRANDED, VERDICTS, Outcome, Verdict

EXIT_FOUND = 1
"""Stranded runs were found, or a migration was refused."""
EXIT_UNCHECKED = 2
"""The check could not be made (as Click's usage errors)."""
SHOWN = 100
"""Stranded runs `deploy-check` lists in its human output (`--json` lists every run)."""
DRY_RUN_SHOWN = 20
"""Runs `runs migrate --dry-run` lists in its human output (`--json` lists every run)."""


@contextmanager
def checking() -> Iterator[None]:
    """Any error of the check itself as one line on stderr and exit status 2 (with `-v`, the
    traceback too): a gate's 1 means only that it found something."""
    try:
        yield
    except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
        raise
    except Exception as exc:
        root = click.get_current_context().find_root()
        if isinstance(root.obj, dict) and root.obj.get("verbose"):
            traceback.print_exc()
        click.echo(f"error: {one_line(exc)}", err=True)
        raise click.exceptions.Exit(EXIT_UNCHECKED) from None


def progress(what: str) -> Callable[[int], None] | None:
    """A counter of the runs read, on stderr, when it is a terminal (else None)."""
    if not sys.stderr.isatty():
        return None

    def show(count: int) -> None:
        click.echo(f"\r{what}: {count:,} runs read", err=True, nl=False)

    return show


def done(shown: Callable[[int], None] | None) -> None:
    """Clear the progress line, if one was shown."""
    if shown is not None:
        click.echo("\r\x1b[K", err=True, nl=False)


def read(what: str, job: Callable[[Callable[[int], None] | None], Any]) -> Any:
    """Run `job(progress)` on a fresh event loop, its progress shown on a terminal."""
    shown = progress(what)
    try:
        return run_async(lambda: job(shown))
    finally:
        done(shown)


def finish(found: bool) -> NoReturn:
    """Exit with status 1 when the check `found` something (0 otherwise)."""
    click.get_current_context().exit(EXIT_FOUND if found else 0)


# -- reactorflow versions ------------------------------------------------------------------------


@click.command("versions")
@json_option
@app_options
def versions_command(as_json: bool, apps: tuple[str, ...], redis_url: str | None,
                     namespace: str | None) -> None:
    """Per reactor, the versions the --app modules declare and the in-flight runs (running,
    paused or sleeping, rolling back, held) of each stored version; versions no loaded module
    declares are marked stranded (exit status 1 if any run is on one)."""
    with checking():
        prepare(apps, redis_url, namespace)
        report: inventory.VersionsReport = read("versions", inventory.versions)
    if report.unreadable:
        click.echo(f"warning: {len(report.unreadable)} in-flight run(s) cannot be read and are "
                   f"not counted: {', '.join(report.unreadable[:10])} ('reactorflow runs show "
                   "RUN_ID' says why)", err=True)
    stranded = sum(r.stranded for r in report.reactors)
    if as_json:
        emit_json({"reactors": [
            {"reactor": r.reactor, "declared": r.declared,
             "versions": [{"version": v.version, "in_flight": v.in_flight,
                           "stranded": v.stranded} for v in r.versions]}
            for r in report.reactors]})
        finish(stranded > 0)
    if not report.reactors:
        click.echo("no runs in flight, and no reactor declared (name your modules with --app)")
        finish(False)
    rows = []
    for r in report.reactors:
        for index, v in enumerate(r.versions):
            note = ""
            if v.stranded:
                note = "stranded" + ("" if v.migrates_to is None else
                                     f" (a migration to {v.migrates_to} is declared)")
            rows.append([r.reactor if index == 0 else "",
                         (", ".join(map(str, r.declared)) or "none") if index == 0 else "",
                         str(v.version), str(v.in_flight), note])
    table(["REACTOR", "DECLARED", "VERSION", "IN FLIGHT", "STRANDED"], rows)
    if stranded:
        click.echo(f"\n{stranded} in-flight run(s) are on versions no loaded module declares: "
                   "load the modules that declare them, or see what a deploy would do with "
                   "'reactorflow deploy-check'")
    finish(stranded > 0)


# -- reactorflow deploy-check --------------------------------------------------------------------


def verdict_form(verdict: Verdict) -> dict[str, Any]:
    return {"id": verdict.run_id, "reactor": verdict.reactor, "version": verdict.version,
            "verdict": verdict.verdict, "differences": verdict.differences}


def show_stranded(verdicts: Sequence[Verdict], shown: int) -> None:
    """Each stranded run (up to `shown`) with its differences, one per line."""
    stranded = [v for v in verdicts if v.verdict == STRANDED]
    for verdict in stranded[:shown]:
        where = ("" if verdict.reactor is None else
                 f"  {verdict.reactor}  version {verdict.version}")
        click.echo(clean(f"{verdict.run_id}{where}"))
        for difference in verdict.differences:
            click.echo(clean(f"  - {difference}"))
    if len(stranded) > shown:
        click.echo(f"... and {len(stranded) - shown} more stranded run(s) (--json lists every "
                   "run)")


@click.command("deploy-check")
@json_option
@app_options
def deploy_check_command(as_json: bool, apps: tuple[str, ...], redis_url: str | None,
                         namespace: str | None) -> None:
    """Say what the code of the --app modules (the new deploy) would do with every in-flight
    run: it continues it, migrates it, or strands it (with the differences). Writes nothing;
    exit status 1 if any run would be stranded, 2 if the check could not be made."""
    with checking():
        prepare(apps, redis_url, namespace)
        verdicts: list[Verdict] = read("deploy-check", inventory.deploy_check)
    found = any(v.verdict == STRANDED for v in verdicts)
    if as_json:
        emit_json({"runs": [verdict_form(v) for v in verdicts]})
        finish(found)
    if not verdicts:
        click.echo("deploy-check: no runs in flight")
        finish(False)
    counts = Counter((v.reactor, v.version, v.verdict) for v in verdicts)
    keys = sorted({(v.reactor, v.version) for v in verdicts},
                  key=lambda k: (k[0] is None, k[0] or "", k[1] or 0))
    table(["REACTOR", "VERSION", *(v.upper() for v in VERDICTS)],
          [[reactor or "(unreadable)", "-" if version is None else str(version),
            *(str(counts[(reactor, version, verdict)]) for verdict in VERDICTS)]
           for reactor, version in keys])
    stranded = sum(1 for v in verdicts if v.verdict == STRANDED)
    if stranded:
        click.echo("\nstranded:")
        show_stranded(verdicts, SHOWN)
        click.echo(f"\ndeploy-check: {stranded} of {len(verdicts)} in-flight run(s) would be "
                   "stranded by this code")
    else:
        click.echo(f"\ndeploy-check: every in-flight run ({len(verdicts)}) continues or "
                   "migrates")
    finish(found)


# -- reactorflow runs migrate ---------------------------------------------------------------------


def outcome_form(outcome: Outcome) -> dict[str, Any]:
    return {"id": outcome.run_id,
            "outcome": ("refused" if outcome.error is not None else
                        "already" if outcome.already else "migrated"),
            "version": outcome.version,
            "error": None if outcome.error is None else one_line(outcome.error)}


def outcome_line(outcome: Outcome) -> str:
    if outcome.error is not None:
        return f"{outcome.run_id}  refused: {one_line(outcome.error)}"
    if outcome.already:
        return f"{outcome.run_id}  already on version {outcome.version} (nothing to do)"
    return f"{outcome.run_id}  migrated to version {outcome.version}"


@click.command("migrate")
@click.option("--reactor", "name", required=True, metavar="NAME",
              help="The reactor whose runs move (declared by an --app module).")
@click.option("--from-version", "version", required=True, type=click.IntRange(min=1),
              metavar="N", help="The version they move from.")
@click.option("--dry-run", is_flag=True,
              help="Say what each run's migration would do: nothing is written.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@app_options
def migrate_command(name: str, version: int, dry_run: bool, yes: bool, as_json: bool,
                    apps: tuple[str, ...], redis_url: str | None,
                    namespace: str | None) -> None:
    """Move the in-flight runs of reactor NAME on version N onto its newest declared version
    (as `await reactor.migrate(run_id)`), ahead of a deploy that drops version N. Each run's
    outcome is printed; a refusal leaves that run as it was and the others go on (exit status
    1 if any was refused). Running it again is safe."""
    with checking():
        prepare(apps, redis_url, namespace)
        reactor = registry.lookup(name)
        if reactor is None:
            raise click.BadParameter(
                f"no reactor {name!r} is declared by the modules loaded (declared: "
                f"{', '.join(sorted(registry.names())) or 'none'}); name its module with --app",
                param_hint="--reactor")
        if version >= reactor.version:
            raise click.BadParameter(
                f"version {version} is not older than the newest version of {name!r} the "
                f"modules loaded declare ({reactor.version}): there is no newer version to "
                "move its runs onto",
                param_hint="--from-version")
        heads = run_async(lambda: inventory.on_version(name, version))
        target = f"of {name} on version {version}"
        if not heads:
            if as_json:
                emit_json({"reactor": name, "from_version": version,
                           "to_version": reactor.version, "runs": []})
            else:
                click.echo(f"no in-flight run {target}: nothing to migrate")
            finish(False)
        if dry_run:
            verdicts: list[Verdict] = run_async(
                lambda: inventory.classify(heads, inventory.would_migrate))
            show_dry_run(verdicts, name, version, reactor.version, as_json)
            finish(any(v.verdict == STRANDED for v in verdicts))
        if not yes and not click.confirm(
                f"Migrate {len(heads)} in-flight run(s) {target} to version "
                f"{reactor.version}?", err=True):
            click.echo("nothing was migrated", err=True)
            finish(False)
        outcomes: list[Outcome] = []

        def report(outcome: Outcome) -> None:
            outcomes.append(outcome)
            if not as_json:
                click.echo(clean(outcome_line(outcome)))

        run_async(lambda: inventory.migrate_runs(reactor, [h.run_id for h in heads], report))
    refused = sum(1 for o in outcomes if o.error is not None)
    if as_json:
        emit_json({"reactor": name, "from_version": version, "to_version": reactor.version,
                   "runs": [outcome_form(o) for o in outcomes]})
    else:
        moved = sum(1 for o in outcomes if o.error is None and not o.already)
        already = len(outcomes) - moved - refused
        click.echo(f"runs migrate: {moved} migrated, {refused} refused"
                   + (f", {already} already on version {reactor.version}" if already else "")
                   + f" (of {len(outcomes)})")
    finish(refused > 0)


def show_dry_run(verdicts: Sequence[Verdict], name: str, version: int, to: int,
                 as_json: bool) -> None:
    if as_json:
        emit_json({"reactor": name, "from_version": version, "to_version": to,
                   "dry_run": True, "runs": [verdict_form(v) for v in verdicts]})
        return
    fits = sum(1 for v in verdicts if v.verdict == MIGRATES)
    click.echo(f"{len(verdicts)} in-flight run(s) of {name} are on version {version}: {fits} "
               f"would migrate to version {to}, {len(verdicts) - fits} would be refused "
               "(dry run: nothing was written)")
    for verdict in verdicts[:DRY_RUN_SHOWN]:
        click.echo(clean(f"{verdict.run_id}  {verdict.verdict}"))
        for difference in verdict.differences:
            click.echo(clean(f"  - {difference}"))
    if len(verdicts) > DRY_RUN_SHOWN:
        click.echo(f"... and {len(verdicts) - DRY_RUN_SHOWN} more (--json lists every run)")
