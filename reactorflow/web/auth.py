"""Bearer-token checks: with tokens configured every API request needs one of them, and a
change needs an `operate` one (see reactorflow.web.roles); without any, reads are open and
changes are always refused. A refused request is logged (logger `reactorflow.web`: the client's
address and the token's name when it has one, never the token's text)."""

from __future__ import annotations

import logging

from starlette.requests import Request

from reactorflow.errors import ReactorflowError
from reactorflow.web.roles import NamedToken, TokenSet

log = logging.getLogger("reactorflow.web")


class Unauthorized(ReactorflowError):
    """The request lacks the bearer token it needs (HTTP 401)."""


class Forbidden(ReactorflowError):
    """The request's token may not do this: a `read` token asked for a change (HTTP 403).

    Attributes:
        token: The token's name.
    """

    def __init__(self, message: str, *, token: str) -> None:
        super().__init__(message)
        self.token = token


def presented(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _refused(request: Request, reason: str, name: str | None) -> None:
    client = request.client.host if request.client is not None else "-"
    log.warning("reactorflow.web.auth_refused client=%s token=%s reason=%s request=%s %s",
                client, name or "-", reason, request.method, request.url.path)


def check(request: Request, tokens: TokenSet | None, *, mutation: bool) -> NamedToken | None:
    """The token the request may go on with (None: no tokens configured, an open read).

    Raises:
        Unauthorized: no token, or one the server does not know (or a change on a server
            without tokens).
        Forbidden: a change asked for with a `read` token.
    """
    given = presented(request)
    if tokens is None:
        if mutation:
            raise Unauthorized(
                "changes need a token, and this server has none: restart it with --token or "
                "--tokens FILE (or REACTORFLOW_DASHBOARD_TOKEN, or create_app(token=...))")
        return None
    if given is None:
        _refused(request, "no_token", None)
        raise Unauthorized("this server needs a bearer token: send Authorization: Bearer <token>")
    token = tokens.identify(given)
    if token is None:
        _refused(request, "unknown_token", None)
        raise Unauthorized("wrong token")
    if mutation and not token.may_change():
        _refused(request, "read_only", token.name)
        raise Forbidden(f"token {token.name!r} may only read (role {token.role.value}): "
                        "changes need a token with role operate", token=token.name)
    return token
