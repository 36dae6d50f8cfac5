"""`reactorflow subjects forget|erasures`: erase a data subject, and read the erasures' audit
records (see Protecting data: Subjects and erasure)."""

from __future__ import annotations

import click

from reactorflow.cli.context import app_options, prepare, run_async
from reactorflow.cli.output import emit_json, table, when
from reactorflow.jsonforms import erasure_form
from reactorflow.runtime.subjects.forget import forget_subject, list_erasures


@click.group("subjects")
def subjects_group() -> None:
    """The data subjects of runs (`rf.Reactor(subject=...)`): erase one, list erasures."""


@subjects_group.command("forget")
@click.argument("subject")
@app_options
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--actor", default=None, help="Who erases it (default: user@host).")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a line of text.")
def forget_command(subject: str, apps: tuple[str, ...], redis_url: str | None,
                   namespace: str | None, yes: bool, actor: str | None, as_json: bool) -> None:
    """Erase SUBJECT (as the reactor's subject= template renders it, e.g. a customer id):
    its data key is destroyed, so every stored value of its runs reads "<erased>" from now
    on, and its runs in flight are cancelled ("subject erased"). This cannot be undone. Load
    your reactors with --app (or REACTORFLOW_APP) so their runs in flight are cancelled here."""
    prepare(apps, redis_url, namespace)
    if not yes and not click.confirm(
            "Erase this subject? Its runs' stored values become unreadable for good, and its "
            "runs in flight are cancelled", err=True):
        click.echo("nothing was erased", err=True)
        return
    touched = run_async(lambda: forget_subject(subject, actor=actor))
    if as_json:
        emit_json({"runs": touched})
    elif touched:
        click.echo(f"subject erased: {touched} run(s) touched")
    else:
        click.echo("no such subject (unknown, or erased already): nothing was changed")


@subjects_group.command("erasures")
@app_options
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1),
              help="How many, the newest first.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def erasures_command(apps: tuple[str, ...], redis_url: str | None, namespace: str | None,
                     limit: int, as_json: bool) -> None:
    """The audit records of erasures, newest first: when, by whom, the subject's digest (never
    its text), how many runs, how many were cancelled."""
    prepare(apps, redis_url, namespace)
    found = run_async(lambda: list_erasures(limit))
    if as_json:
        emit_json([erasure_form(e) for e in found])
        return
    if not found:
        click.echo("no erasures recorded")
        return
    table(["AT", "ACTOR", "SUBJECT DIGEST", "RUNS", "CANCELLED"],
          [[when(e.at.timestamp()), e.actor, e.subject_digest[:16], str(e.runs),
            str(len(e.cancelled))] for e in found])
