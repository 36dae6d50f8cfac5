"""Human output (aligned tables, colour only on a terminal) and `--json` output."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import click

from reactorflow import clock
from reactorflow.cli.notes import step_note
from reactorflow.jsonforms import dumps, page_form, run_form
from reactorflow.records import Event
from reactorflow.snapshot import Run, RunPage, StepState
from reactorflow.status import EventKind

STATUS_COLOURS = {
    "completed": "green", "failed": "red", "paused": "yellow", "running": "cyan",
    "rolling_back": "magenta", "cancelled": "bright_black", "aborted": "magenta",
    "halted": "blue", "pending": "bright_black", "skipped": "bright_black",
    "compensated": "magenta", "undone": "magenta", "waiting": "yellow",
    "held": "bright_red",
}


_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)}


def clean(text: str) -> str:
    """`text` with control characters shown escaped: a stored value can never move the
    cursor, recolour or retitle the terminal it is printed on."""
    return text.translate(_CONTROL)


def when(at: float | None) -> str:
    if not at:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def moment(at: float) -> str:
    """A time of day with milliseconds, local time (the history's `At`)."""
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


def show_event(event: Event) -> None:
    """One history entry on one line: time, kind, step, attempt, detail and who (an operator's
    action: `by ACTOR`)."""
    parts = [moment(event.at), event.kind.ljust(20)]
    if event.step:
        parts.append(event.step)
    if event.attempt:
        parts.append(f"attempt {event.attempt}")
    if event.detail:
        parts.append(event.detail)
    if event.actor:
        parts.append(f"by {event.actor}")
    click.echo(clean("  ".join(parts).rstrip()))


def duration(state: StepState) -> str:
    if state.started_at is None or state.finished_at is None:
        return "-"
    seconds = state.finished_at - state.started_at
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def label(step: str | Sequence[str]) -> str:
    return step if isinstance(step, str) else "/".join(step)


def status_text(value: str) -> str:
    """A status, coloured (click.echo drops colour when not writing to a terminal)."""
    return click.style(value, fg=STATUS_COLOURS.get(value))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *,
          coloured: int | None = None) -> None:
    """Print rows aligned under `headers`; column `coloured` holds statuses."""
    rows = [[clean(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    click.echo(click.style("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
                           .rstrip(), bold=True))
    for row in rows:
        cells = []
        for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
            padded = cell.ljust(width)
            cells.append(status_text(cell) + padded[len(cell):] if i == coloured else padded)
        click.echo("  ".join(cells).rstrip())


def emit_json(value: Any) -> None:
    click.echo(dumps(value).decode())


def show_page(page: RunPage, as_json: bool) -> None:
    if page.unreadable:  # (on stderr: JSON on stdout stays the page)
        click.echo(f"warning: {len(page.unreadable)} run(s) cannot be read and are not listed: "
                   f"{', '.join(page.unreadable)} ('reactorflow runs show RUN_ID' says why)",
                   err=True)
    if as_json:
        emit_json(page_form(page))
        return
    if not page.runs:
        click.echo("no runs")
        return
    rows = []
    for run in page.runs:
        note = (f"waiting on {', '.join(label(w) for w in run.waiting_on)}" if run.waiting_on
                else str(run.error) if run.error is not None else "")
        rows.append([run.id, run.reactor, str(run.version), run.status.value,
                     when(run.created_at), when(run.updated_at), note])
    table(["RUN", "REACTOR", "VERSION", "STATUS", "CREATED", "UPDATED", "NOTE"], rows,
          coloured=3)
    if page.next_cursor:
        click.echo(f"\nmore: --cursor {page.next_cursor}", err=True)


def show_run(run: Run, as_json: bool) -> None:
    if as_json:
        emit_json(run_form(run))
        return
    facts = [("run", run.id), ("reactor", run.reactor), ("version", str(run.version)),
             ("status", status_text(run.status.value)), ("created", when(run.created_at)),
             ("updated", when(run.updated_at))]
    facts += [("migrated", f"{event.detail} (at {when(event.at)})") for event in run.history
              if event.kind == EventKind.RUN_MIGRATED]  # "1 -> 2: completed fraud_check"
    if run.retried_from:
        facts.append(("retried from", run.retried_from))
    if run.waiting_on:
        facts.append(("waiting on", ", ".join(label(w) for w in run.waiting_on)))
    if run.timeout_at:
        facts.append(("times out", when(run.timeout_at)))
    if run.paused_by is not None:
        reason = f": {run.paused_by.reason}" if run.paused_by.reason else ""
        facts.append(("paused by", f"{run.paused_by.by} at {when(run.paused_by.at)}{reason}"))
    for name, value in (("halted", run.halt_reason), ("cancelled", run.cancel_reason)):
        if value:
            facts.append((name, value))
    if run.error is not None:
        facts.append(("error", str(run.error)))
        facts += [("rollback failure", f"{f.kind} of {f.step}: {f.type}: {f.message}")
                  for f in run.error.rollback_failures]
    width = max(len(name) for name, _ in facts)
    for name, value in facts:
        click.echo(f"{name.ljust(width)}  {value if name == 'status' else clean(value)}")
    if run.steps:
        click.echo()
        now = clock.now()
        rows = [[key, state.status.value, str(state.attempts), duration(state),
                 step_note(state, now)] for key, state in run.steps.items()]
        table(["STEP", "STATUS", "ATTEMPTS", "DURATION", "NOTE"], rows, coloured=1)
