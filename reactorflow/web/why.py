"""`GET /api/runs/{run_id}/why`: what a run waits on (`rf.explain`), as a JSON list of
blockers (empty: it has ended, or it is moving; the run's own JSON says which)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request

from reactorflow.runtime.ops.explain import explain
from reactorflow.web.responses import JSON


async def explain_run(request: Request) -> JSON:
    """The run's blockers (`rf.Blocker`, datetimes as ISO 8601 in UTC); 404 for an unknown
    run."""
    return JSON(msgspec.to_builtins(await explain(request.path_params["run_id"])))
