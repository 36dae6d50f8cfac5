"""Who an operator's action is done by (api.md §16, Audit).

Every operator action (continue, undo, cancel, retry, retry-step, skip-step, rewind, pause,
resume, migrate) records who asked for it in the `actor` field of the event it writes to the
run's history (`rf.Event.actor`): the `actor=` given to the `rf.Reactor` method; else the one
the surrounding request acts as (the HTTP API sets its bearer token's name for the handling of
each request, see `acting`); else this process's `user@host` (the CLI's OS user). Events the
engine writes on its own (a step's, a timer's) have no actor (`""`).

The actor travels with the call as a context variable: the runtime reads it where an action
writes its event, and a request left for another execution to honour (a cancel, a pause)
carries it in the stored request.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from reactorflow.errors import ReactorflowError

_actor: ContextVar[str | None] = ContextVar("reactorflow_actor", default=None)

ACTOR_LIMIT = 200  # characters


def operator() -> str:
    """Who this process acts as: `user@host` (the user id when it has no name)."""
    try:
        user = getpass.getuser()
    except Exception:  # no name for the uid (a container), or no such lookup here
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def checked(actor: object, operation: str) -> str | None:
    """`actor` as given to `operation` (None: not given).

    Raises:
        ReactorflowError: it is not a non-empty `str` of at most `ACTOR_LIMIT` characters
            (nothing was changed).
    """
    if actor is None:
        return None
    if not isinstance(actor, str) or not actor.strip() or len(actor) > ACTOR_LIMIT:
        raise ReactorflowError(
            f"{operation}: actor must name who acts, as a non-empty str of at most "
            f"{ACTOR_LIMIT} characters (or be left out: this process's user@host), not "
            f"{actor!r:.60}; nothing was changed")
    return actor.strip()


@contextmanager
def acting(actor: str | None) -> Iterator[None]:
    """Within the block, operator actions are recorded as done by `actor` (None: keep the
    actor already in effect)."""
    if actor is None:
        yield
        return
    token = _actor.set(actor)
    try:
        yield
    finally:
        _actor.reset(token)


def in_effect() -> str:
    """The actor set by `acting` around this call, else `""` (the engine, acting by itself)."""
    return _actor.get() or ""


def who() -> str:
    """Who the operator action being written is done by: the actor in effect, else this
    process's `user@host`."""
    return _actor.get() or operator()
