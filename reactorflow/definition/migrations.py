"""Declared migrations: what `@reactor.migrate(from_version=N)` records on the reactor of the
version it leads to. The runtime (`runtime.ops.migrations`) finds a stored run's path through
them and applies it; this module only records and checks the declaration."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from reactorflow.definition import naming
from reactorflow.errors import DefinitionError

MigrationFn = Callable[[Any], "Awaitable[None] | None"]
"""A migration hook: receives an `rf.Migration`, sync or async, returns nothing."""


@dataclass(frozen=True, slots=True)
class MigrationHook:
    """One declared migration: from `from_version` onto `to_version` of reactor `reactor`."""

    reactor: str
    from_version: int
    to_version: int
    fn: MigrationFn
    origin: naming.Origin

    @property
    def label(self) -> str:
        """How errors name the hook: its function and where it was declared."""
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        return f"{name} ({self.origin})"


def hook(reactor: str, to_version: int, from_version: int, fn: Any,
         existing: MigrationHook | None) -> MigrationHook:
    """The record of `fn` declared as the migration of `reactor` from `from_version` onto
    `to_version`.

    Raises:
        DefinitionError: `fn` is not callable, or another place declared a migration of this
            reactor version from `from_version` (both places named).
    """
    if not callable(fn):
        raise DefinitionError(f"reactor {reactor!r}: @migrate(from_version={from_version}) "
                              f"decorates a function that takes an rf.Migration, got {fn!r}",
                              reactor=reactor)
    declared = MigrationHook(reactor, from_version, to_version, fn, naming.caller_origin())
    if existing is not None and existing.origin.place != declared.origin.place:
        raise DefinitionError(
            f"reactor {reactor!r} version {to_version} declares two migrations from version "
            f"{from_version}: {existing.origin} and {declared.origin}; keep one",
            reactor=reactor)
    return declared
