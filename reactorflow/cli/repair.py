"""Repairing runs on the command line (api.md §15): `runs retry-step` and `runs skip-step` on a
held run, `runs rewind` on a run whose work is in effect, `runs pause` and `runs resume`. Each
finds the run's reactor (declared by `--app`), asks it, and prints the run as the operation
left it (with `--wait`, once it settled), as `continue` does; a refusal is one line naming the
run's status and the commands it allows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import click

from reactorflow.cli.context import app_options, prepare, run_async
from reactorflow.cli.output import show_run
from reactorflow.cli.runs import json_option
from reactorflow.cli.settle import check_wait, settled, wait_options
from reactorflow.cli.values import json_value, step_path
from reactorflow.runtime.ops.lookup import declared_reactor
from reactorflow.snapshot import Run

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

WAIT_NOTE = (" With --wait, a run that goes on in a worker (or, for pause, finishes its steps "
             "in flight) is waited for until it settles (or exit 3 after --timeout).")


def operate(run_id: str, wait: bool, timeout: float | None,
            operation: Callable[[Reactor], Awaitable[Run]]) -> Run:
    """Run `operation` on the reactor of run `run_id` (declared here), then, with `wait`,
    wait for the run to settle; returns the run as it was left."""

    async def go() -> Run:
        reactor = await declared_reactor(run_id)
        run = await operation(reactor)
        return await settled(reactor, run, wait, timeout)

    return run_async(go)


@click.command("retry-step")
@click.argument("run_id")
@click.argument("step", metavar="STEP")
@wait_options
@json_option
@app_options
def retry_step_command(run_id: str, step: str, wait: bool, timeout: float | None,
                       as_json: bool, apps: tuple[str, ...], redis_url: str | None,
                       namespace: str | None) -> None:
    """Run the failed STEP of held run RUN_ID again with the code now deployed (a nested step
    as a/b), then go on; the step keeps its idempotency key."""
    check_wait(wait, timeout)
    prepare(apps, redis_url, namespace)
    path = step_path(step)
    show_run(operate(run_id, wait, timeout, lambda r: r.retry_step(run_id, path)), as_json)


@click.command("skip-step")
@click.argument("run_id")
@click.argument("step", metavar="STEP")
@click.option("--result", required=True, metavar="JSON|@FILE",
              help="The step's result as JSON, or @path of a JSON file (validated against "
                   "its return type).")
@wait_options
@json_option
@app_options
def skip_step_command(run_id: str, step: str, result: str, wait: bool, timeout: float | None,
                      as_json: bool, apps: tuple[str, ...], redis_url: str | None,
                      namespace: str | None) -> None:
    """Record --result as what the failed STEP of held run RUN_ID returned (a nested step as
    a/b), then go on; a result that does not fit the step's return type writes nothing."""
    check_wait(wait, timeout)
    value: Any = json_value(result, "--result")
    prepare(apps, redis_url, namespace)
    path = step_path(step)
    show_run(operate(run_id, wait, timeout,
                     lambda r: r.skip_step(run_id, path, result=value)), as_json)


@click.command("rewind")
@click.argument("run_id")
@click.option("--to", "to", required=True, metavar="STEP",
              help="The step to go back to: it and every step that depends on it are undone, "
                   "newest first, then run again.")
@click.option("--inputs", metavar="JSON|@FILE",
              help="Changed input fields as a JSON object (or @path of a JSON file), merged "
                   "into the run's inputs and validated.")
@wait_options
@json_option
@app_options
def rewind_command(run_id: str, to: str, inputs: str | None, wait: bool,
                   timeout: float | None, as_json: bool, apps: tuple[str, ...],
                   redis_url: str | None, namespace: str | None) -> None:
    """Take run RUN_ID (completed, paused, held, cancelled or aborted) back to step --to: undo
    it and its dependents (their undo handlers run), then run them again in the same run;
    the steps that do not depend on it keep their results."""
    check_wait(wait, timeout)
    changed: Any = None if inputs is None else json_value(inputs, "--inputs")
    if changed is not None and not isinstance(changed, dict):
        raise click.BadParameter("give the changed input fields as a JSON object",
                                 param_hint="--inputs")
    prepare(apps, redis_url, namespace)
    show_run(operate(run_id, wait, timeout,
                     lambda r: r.rewind(run_id, to=to, inputs=changed)), as_json)


@click.command("pause")
@click.argument("run_id")
@click.option("--reason", default="", metavar="TEXT",
              help="Why: recorded in run.paused_by and the history.")
@wait_options
@json_option
@app_options
def pause_command(run_id: str, reason: str, wait: bool, timeout: float | None, as_json: bool,
                  apps: tuple[str, ...], redis_url: str | None, namespace: str | None) -> None:
    """Stop running run RUN_ID at its next step boundary (steps in flight finish): it ends
    paused, waiting on nothing, until 'reactorflow runs resume'; a sleeping run is paused
    without waking it."""
    check_wait(wait, timeout)
    prepare(apps, redis_url, namespace)
    show_run(operate(run_id, wait, timeout, lambda r: r.pause(run_id, reason=reason)), as_json)


@click.command("resume")
@click.argument("run_id")
@wait_options
@json_option
@app_options
def resume_command(run_id: str, wait: bool, timeout: float | None, as_json: bool,
                   apps: tuple[str, ...], redis_url: str | None, namespace: str | None) -> None:
    """Take on again run RUN_ID, which an operator paused (a run paused at an interrupt is
    resumed by 'reactorflow continue')."""
    check_wait(wait, timeout)
    prepare(apps, redis_url, namespace)
    show_run(operate(run_id, wait, timeout, lambda r: r.resume(run_id)), as_json)


for _command in (retry_step_command, skip_step_command, rewind_command, pause_command,
                 resume_command):
    _command.help = (_command.help or "") + WAIT_NOTE
COMMANDS: tuple[click.Command, ...] = (retry_step_command, skip_step_command, rewind_command,
                                       pause_command, resume_command)
"""The commands of this module, added to the `runs` group by `reactorflow.cli`."""
