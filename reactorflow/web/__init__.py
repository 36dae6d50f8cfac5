"""The HTTP API and the dashboard: `reactorflow.web.create_app(*, token=None)`.

An ASGI app (Starlette, from the `reactorflow[web]` extra) serving the reactors registered in
this process (those whose modules were imported) and every stored run. Mount it into an
existing ASGI app or serve it with `reactorflow dashboard`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactorflow.errors import ConfigurationError
from reactorflow.web.token import TOKEN_ENV

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["TOKEN_ENV", "create_app"]


def create_app(*, token: str | None = None) -> Starlette:
    """The dashboard and its HTTP API as one Starlette app.

    With a token (given here or by `REACTORFLOW_DASHBOARD_TOKEN`) every API request needs
    `Authorization: Bearer <token>`; without one, reads are open and every change is refused
    (there is no unauthenticated write mode).

    Args:
        token: the bearer token (None: read `REACTORFLOW_DASHBOARD_TOKEN`; an empty string is
            refused).

    Raises:
        ConfigurationError: the `reactorflow[web]` extra is not installed, or the token is
            empty.
    """
    try:
        import starlette  # noqa: F401, PLC0415 - the optional web extra
    except ImportError as exc:
        raise ConfigurationError(
            "the dashboard and HTTP API need the web extra: pip install 'reactorflow[web]'",
            option="web") from exc
    from reactorflow.web.app import build  # noqa: PLC0415 - needs the web extra

    return build(token)
