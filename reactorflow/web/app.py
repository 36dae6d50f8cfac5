"""Assembling the Starlette app: routes, the token check, error responses, static assets."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from html import escape as html_escape
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from reactorflow import audit
from reactorflow.errors import ConfigurationError
from reactorflow.web import api, bulk, events, prometheus, repair, stats, subjects, why
from reactorflow.web.auth import check
from reactorflow.web.responses import JSON, error_response
from reactorflow.web.roles import TokenSet, token_set
from reactorflow.web.token import TOKEN_ENV

Handler = Callable[[Request], Awaitable[Response]]
STATIC = files("reactorflow.web") / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'none'")


SESSION = "reactorflow.token"
"""The scope key of the token a request was let in with (`roles.NamedToken`, or None)."""


def guarded(handler: Handler, tokens: TokenSet | None, *, mutation: bool = False) -> Handler:
    """`handler` behind the token check, with errors as `{"error", "message"}` JSON; what it
    does is done as the token's name (its history records it: reactorflow.audit)."""

    async def endpoint(request: Request) -> Response:
        try:
            named = request.scope[SESSION] = check(request, tokens, mutation=mutation)
            with audit.acting(named.name if named is not None else None):
                return await handler(request)
        except Exception as exc:  # every error becomes a JSON error response
            return error_response(exc)

    return endpoint


async def page(request: Request) -> Response:
    """The dashboard's page: a static shell (no user data; the script renders it escaped)."""
    base = html_escape(request.scope.get("root_path", "").rstrip("/") + "/", quote=True)
    html = (STATIC / "index.html").read_text(encoding="utf-8").replace("{{base}}", base)
    return HTMLResponse(html, headers={"Content-Security-Policy": CSP,
                                       "Cache-Control": "no-store",
                                       "X-Content-Type-Options": "nosniff",
                                       "Referrer-Policy": "no-referrer"})


async def no_route(request: Request, exc: Any) -> Response:
    code = getattr(exc, "status_code", 404)
    return JSON({"error": "NoRoute", "message": f"no route {request.method} {request.url.path}"},
                status_code=code)


async def session(request: Request) -> Response:
    """`{"token", "role"}`: the name and role of the token the request came with (both null
    on a server without tokens, whose reads are open and changes refused)."""
    named = request.scope.get(SESSION)
    return JSON({"token": named.name if named is not None else None,
                 "role": named.role.value if named is not None else None})


def accepted_tokens(token: str | None,
                    tokens: Mapping[str, Mapping[str, str]] | None) -> TokenSet | None:
    """The tokens a server accepts: the named ones, plus the single `token` (an operate
    token named "token"; None: `REACTORFLOW_DASHBOARD_TOKEN`, when set). None: no token.

    Raises:
        ConfigurationError: an empty `token`.
        TokenConfigError: a bad entry in `tokens` (naming it).
    """
    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    elif not token:
        raise ConfigurationError("create_app(token=''): give a non-empty token, or None",
                                 option="token")
    accepted = token_set(tokens if tokens is not None else {}, single=token)
    return accepted if accepted.tokens else None


def build(token: str | None,
          tokens: Mapping[str, Mapping[str, str]] | None = None) -> Starlette:
    accepted = accepted_tokens(token, tokens)

    def read(handler: Handler) -> Handler:
        return guarded(handler, accepted)

    def write(handler: Handler) -> Handler:
        return guarded(handler, accepted, mutation=True)

    routes = [
        Route("/", page),
        Route("/api/session", read(session)),
        Route("/api/runs", read(api.list_runs)),
        Route("/api/events", read(events.list_events)),
        Route("/api/reactors", read(api.list_reactors)),
        Route("/api/reactors/{name}", read(api.get_reactor)),
        Route("/api/schedules", read(api.list_schedules)),
        Route("/api/stats/hour", read(stats.hour)),
        Route("/metrics", read(prometheus.metrics)),
        Route("/api/workers", read(api.list_workers)),
        Route("/api/subjects:forget", write(subjects.forget), methods=["POST"]),
        Route("/api/subjects/erasures", read(subjects.erasures)),
        Route("/api/schedules/{target}/pause", write(api.schedule_toggle(True)),
              methods=["POST"]),
        Route("/api/schedules/{target}/resume", write(api.schedule_toggle(False)),
              methods=["POST"]),
        Route("/api/runs:bulk", write(bulk.run_bulk), methods=["POST"]),
        Route("/api/runs/{run_id}", read(api.get_run)),
        Route("/api/runs/{run_id}/events", read(events.run_events)),
        Route("/api/runs/{run_id}/why", read(why.explain_run)),
        Route("/api/runs/{run_id}/continue", write(api.continue_run), methods=["POST"]),
        Route("/api/runs/{run_id}/continue/check", read(api.check_continue), methods=["POST"]),
        *(Route(f"/api/runs/{{run_id}}/{action}", write(api.steering(action)), methods=["POST"])
          for action in api.STEERING),
        *(Route(f"/api/runs/{{run_id}}/{action}", write(repair.repairing(action)),
                methods=["POST"]) for action in repair.REPAIRS),
        Route("/api/runs/{run_id}/steps/{step}/schema", read(repair.step_schema)),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={404: no_route, 405: no_route})
