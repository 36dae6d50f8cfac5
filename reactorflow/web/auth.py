"""Bearer-token checks: with a token configured every API request needs it; without one,
reads are open and changes are always refused."""

from __future__ import annotations

import hmac

from starlette.requests import Request

from reactorflow.errors import ReactorflowError


class Unauthorized(ReactorflowError):
    """The request lacks the bearer token it needs (HTTP 401)."""


def presented(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def check(request: Request, token: str | None, *, mutation: bool) -> None:
    """Raise `Unauthorized` unless the request may go on."""
    given = presented(request)
    if token is None:
        if mutation:
            raise Unauthorized(
                "changes need a token, and this server has none: restart it with --token (or "
                "REACTORFLOW_DASHBOARD_TOKEN, or create_app(token=...))")
        return
    if given is None:
        raise Unauthorized("this server needs a bearer token: send Authorization: Bearer <token>")
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise Unauthorized("wrong token")
