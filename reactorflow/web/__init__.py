"""The HTTP API and the dashboard: `reactorflow.web.create_app(*, token=None, tokens=None)`.

An ASGI app (Starlette, from the `reactorflow[web]` extra) serving the reactors registered in
this process (those whose modules were imported) and every stored run. Mount it into an
existing ASGI app or serve it with `reactorflow dashboard`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from reactorflow.errors import ConfigurationError
from reactorflow.web.token import TOKEN_ENV

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["TOKEN_ENV", "create_app"]


def create_app(*, token: str | None = None,
               tokens: Mapping[str, Mapping[str, str]] | None = None) -> Starlette:
    """The dashboard and its HTTP API as one Starlette app.

    With a token (given here or by `REACTORFLOW_DASHBOARD_TOKEN`, or named ones in `tokens`)
    every API request needs `Authorization: Bearer <token>`, and a change needs a token with
    role `operate` (a `read` token gets 403); without any, reads are open and every change is
    refused (there is no unauthenticated write mode). A change is recorded in the run's history
    as done by the token's name (`rf.Event.actor`).

    Args:
        token: the single bearer token, an `operate` token named `"token"` (None: read
            `REACTORFLOW_DASHBOARD_TOKEN`; an empty string is refused).
        tokens: named tokens, `{name: {"role": "read" | "operate", "token": "..."}}`, or
            `"sha256": <hex digest of the token>` instead of `"token"`.

    Raises:
        ConfigurationError: the `reactorflow[web]` extra is not installed, or the token is
            empty.
        TokenConfigError: an entry of `tokens` with a bad role, without a token or sha256 or
            with both, or the same token as another entry (the message names the entry).
    """
    try:
        import starlette  # noqa: F401, PLC0415 - the optional web extra
    except ImportError as exc:
        raise ConfigurationError(
            "the dashboard and HTTP API need the web extra: pip install 'reactorflow[web]'",
            option="web") from exc
    from reactorflow.web.app import build  # noqa: PLC0415 - needs the web extra

    return build(token, tokens)
