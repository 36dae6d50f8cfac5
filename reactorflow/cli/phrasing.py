"""Errors as the command line says them: advice that names a Python call (`undo(run_id)`)
names the command to type instead (`reactorflow undo RUN_ID`). The one place that phrasing
lives; `reactorflow.cli.main` applies it to every error it prints."""

from __future__ import annotations

from reactorflow.errors import ReactorflowError, RunStateError


def cli_calls(run_id: str) -> dict[str, str]:
    """How the advice of a refusal about run `run_id` names each operation on the CLI."""
    return {
        "undo": f"'reactorflow undo {run_id}'",
        "cancel": f"'reactorflow cancel {run_id}'",
        "retry": f"'reactorflow retry {run_id}'",
        "wait": f"'reactorflow runs watch {run_id}'",
        "continue": f"'reactorflow continue {run_id} STEP --payload JSON'",
        "get": f"'reactorflow runs show {run_id}'",
        "retry_step": f"'reactorflow runs retry-step {run_id} STEP'",
        "skip_step": f"'reactorflow runs skip-step {run_id} STEP --result JSON'",
        "rewind": f"'reactorflow runs rewind {run_id} --to STEP'",
        "pause": f"'reactorflow runs pause {run_id}'",
        "resume": f"'reactorflow runs resume {run_id}'",
    }


def cli_message(exc: ReactorflowError) -> str:
    """The error's message, its advice phrased as CLI commands where it names operations."""
    if isinstance(exc, RunStateError) and exc.run_id is not None:
        return exc.phrased(cli_calls(exc.run_id))
    return str(exc)


def one_line(exc: BaseException) -> str:
    """The error as one line: reactorflow errors by their message, others with their type."""
    if isinstance(exc, ReactorflowError):
        return " ".join(cli_message(exc).split())
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def held_advice(run_id: str, step: str | None) -> str:
    """What an operator can do with held run `run_id` whose step `step` failed, as commands to
    type (`STEP` where the failed step is not known)."""
    calls = {name: call.replace(" STEP", f" {step}") if step else call
             for name, call in cli_calls(run_id).items()}
    return (f"{calls['retry_step']} runs the failed step again, {calls['skip_step']} supplies "
            f"its result, {calls['undo']} rolls it back")
