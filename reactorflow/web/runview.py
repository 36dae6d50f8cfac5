"""A run as the dashboard's run page reads it: `rf.Run`'s keys and `maps`, each map step's
element progress (`runtime.maps.progress`), for `GET /api/runs/{id}` and its event stream."""

from __future__ import annotations

from typing import Any

from reactorflow import config
from reactorflow.jsonforms import run_form
from reactorflow.runtime.maps.progress import run_maps
from reactorflow.runtime.ops.lookup import plan_or_none, run_reactor_version
from reactorflow.snapshot import Run


async def run_view(run: Run) -> dict[str, Any]:
    """`run` as JSON with `maps`: `{map key: {"total", "done", "failed", "running", "undone",
    "skipped", "exact"}}` for every map of the run's own steps that has opened (none when its
    version is not declared in this process).

    Raises:
        CorruptRecord: a map's element slots cannot be decoded.
        StorageError: The backend failed.
    """
    form = run_form(run)
    plan = plan_or_none(run_reactor_version(run.reactor, run.version))
    found = await run_maps(config.current_storage(), run, plan)
    form["maps"] = {key: progress.form() for key, progress in found.items()}
    return form
