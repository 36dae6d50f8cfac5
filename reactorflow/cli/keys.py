"""`reactorflow keys rotate|check`: re-seal stored values under the codec's current key, and
count values per key id (see Protecting data: Rotating keys).

The keys come from the app, never from the command line: the modules given with `--app` (or
`REACTORFLOW_APP`) call `rf.configure(codec=rf.EncryptionCodec(keys=..., current=...))`, as
the workers' do, reading the keys from wherever the app keeps them (a secrets manager, the
environment). `keys check` needs no key.
"""

from __future__ import annotations

import click

from reactorflow import config
from reactorflow.cli.context import app_options, prepare, run_async
from reactorflow.cli.output import emit_json, table
from reactorflow.runtime.keys.rotation import BATCH, KeyCount, Progress, check, rotate


@click.group("keys")
def keys_group() -> None:
    """The codec's keys over the stored values: rotate them, count values per key id."""


def _progress_line(progress: Progress) -> str:
    return (f"runs read {progress.runs}, re-sealed {progress.runs_resealed} "
            f"({progress.values} values); data keys re-wrapped {progress.data_keys}")


@keys_group.command("rotate")
@app_options
@click.option("--to", "to", required=True, metavar="KEY_ID",
              help="The key id every value ends under: the codec's current key.")
@click.option("--batch", default=BATCH, show_default=True, type=click.IntRange(1, 1000),
              help="Runs (and subjects) read per batch.")
@click.option("--json", "as_json", is_flag=True, help="The outcome as JSON.")
def rotate_command(apps: tuple[str, ...], redis_url: str | None, namespace: str | None,
                   to: str, batch: int, as_json: bool) -> None:
    """Re-seal every stored value under KEY_ID, and re-wrap subjects' data keys, in batches,
    with progress on stderr. Configure the codec with current=KEY_ID first (keeping the old
    keys listed) in every process, --app included. Resumable: interrupted, run it again; it
    goes on (nothing already under KEY_ID is touched again). Safe while runs are in flight
    (each run's records are replaced by compare-and-set). Once `keys check` shows no value
    under an old key id, that key can be removed from keys=."""
    prepare(apps, redis_url, namespace)

    def report(progress: Progress) -> None:
        click.echo(_progress_line(progress), err=True)

    outcome = run_async(lambda: rotate(config.current_storage(), config.settings().codec, to,
                                       batch=batch, report=report))
    if as_json:
        emit_json({"runs": outcome.runs, "runs_resealed": outcome.runs_resealed,
                   "values": outcome.values, "data_keys": outcome.data_keys,
                   "busy": outcome.busy,
                   "unreadable": [{"run_id": r, "reason": why} for r, why in outcome.unreadable]})
    else:
        click.echo(f"done: {_progress_line(outcome)}")
        for run_id, why in outcome.unreadable:
            click.echo(f"left as it is: run {run_id}: {why}", err=True)
        if outcome.busy:
            click.echo(f"{len(outcome.busy)} run(s) changed under every attempt (busy): run "
                       "keys rotate again", err=True)
    click.get_current_context().exit(1 if outcome.busy or outcome.unreadable else 0)


@keys_group.command("check")
@app_options
@click.option("--batch", default=BATCH, show_default=True, type=click.IntRange(1, 1000),
              help="Runs (and subjects) read per batch.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def check_command(apps: tuple[str, ...], redis_url: str | None, namespace: str | None,
                  batch: int, as_json: bool) -> None:
    """How many stored values are sealed under each key id ("clear": stored without a codec;
    "subject data keys": under subjects' own keys), and which key wraps each subject's data
    key. Reads only; needs no key."""
    prepare(apps, redis_url, namespace)
    found: KeyCount = run_async(lambda: check(config.current_storage(), batch=batch))
    if as_json:
        emit_json({"runs": found.runs, "values": dict(found.values),
                   "data_keys": dict(found.data_keys),
                   "unreadable": [{"run_id": r, "reason": why} for r, why in found.unreadable]})
        return
    click.echo(f"{found.runs} run(s) read")
    table(["KEY ID", "VALUES", "DATA KEYS WRAPPED"],
          [[key_id, str(found.values.get(key_id, 0)), str(found.data_keys.get(key_id, 0))]
           for key_id in sorted(set(found.values) | set(found.data_keys))])
    for run_id, why in found.unreadable:
        click.echo(f"unreadable: run {run_id}: {why}", err=True)
