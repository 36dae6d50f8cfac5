"""`POST /api/runs:bulk` (api.md §16): body `{"action", "filter": {...}, "step"?, "dry_run"?,
"all"?}`; answers `{"matched": n, "runs": [{"id", "ok", "status", "error"}]}` (a dry run:
`"dry_run": true` and each run's id and status, nothing written). A bad action, filter or
step, or no filter without `"all": true`, is 400 `{"error", "message"}` and changes nothing."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from reactorflow.errors import BulkSelectionError
from reactorflow.runtime.ops import bulk
from reactorflow.web.api import body_of
from reactorflow.web.responses import JSON

FILTER_FIELDS = ("reactor", "status", "since", "until", "error_type", "version",
                 "correlation_id", "idempotency_key", "ids")


def chosen_filter(body: dict[str, Any]) -> bulk.Selection:
    """The selection a request body names.

    Raises:
        BulkSelectionError: a field that is not a filter, a bad value, or no filter without
            `"all": true`.
    """
    given = body.get("filter", {})
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise BulkSelectionError('"filter" must be an object of filters', field="filter")
    unknown = sorted(set(given) - set(FILTER_FIELDS))
    if unknown:
        raise BulkSelectionError(
            f"filter: unknown field(s) {', '.join(unknown)}; use {', '.join(FILTER_FIELDS)}",
            field="filter")
    every = body.get("all", False)
    if not isinstance(every, bool):
        raise BulkSelectionError('"all" must be true or false', field="all")
    return bulk.selection(**{name: given.get(name) for name in FILTER_FIELDS},
                          all_runs=every)


async def run_bulk(request: Request) -> JSON:
    """Act on every run the body's filter selects, each run's outcome in the answer."""
    body = await body_of(request)
    action = bulk.action_of(body.get("action", ""))
    chosen = chosen_filter(body)
    step = body.get("step")
    if step is not None and (not isinstance(step, str) or not step):
        raise BulkSelectionError('"step" must be a step\'s name (a nested one as a/b)',
                                 field="step")
    if action is bulk.Action.RETRY_STEP and step is None:
        raise BulkSelectionError('retry-step needs "step": the failed step to run again',
                                 field="step")
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise BulkSelectionError('"dry_run" must be true or false', field="dry_run")
    runs = await bulk.select(chosen)
    if dry_run:
        return JSON({"matched": len(runs), "dry_run": True,
                     "runs": [{"id": r.id, "ok": None, "status": r.status.value, "error": None}
                              for r in runs]})
    outcomes: list[bulk.Outcome] = []
    await bulk.apply(action, runs, outcomes.append, step=step)
    return JSON({"matched": len(runs), "runs": [o.form() for o in outcomes]})
