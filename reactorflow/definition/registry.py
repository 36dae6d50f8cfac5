"""Reactors alive in this process, by name: workers, the sweeper and the surfaces resolve a
run's reactor here.

A name and version pair is declared in one place. Declaring it again from the same place — the
same line of the same code (module and qualified name), as when a notebook cell or a reloaded
module runs again — replaces the earlier reactor; declaring it from anywhere else (another line
of that code too, such as two declarations at a module's top level or in two lambdas) is a
clash (`naming`).
"""

from __future__ import annotations

from typing import TypeVar

from reactorflow.definition import naming
from reactorflow.definition.reactor import Reactor
from reactorflow.definition.table import Declared

D = TypeVar("D", bound=Declared)

names = naming.names


versions = naming.versions


def lookup(name: str, version: int | None = None) -> Reactor | None:
    """The `rf.Reactor` alive under `name` in this process, or `None`.

    Args:
        name: The reactor's name.
        version: The version wanted (`None`: the newest declared, the one that starts runs).
    """
    found = naming.find(name, version)
    return found if isinstance(found, Reactor) else None


def newest(reactor: D) -> D | Reactor:
    """The newest version declared of `reactor`'s name (new runs start on it, whichever
    version's object the call is made on): `reactor` itself when it is the newest."""
    found = lookup(reactor.name)
    return found if found is not None and found.version > reactor.version else reactor


def declares_subject(name: str) -> bool:
    """Whether some version of reactor `name` declared here has `subject=` (its runs may then
    carry a subject; a name none of whose versions does stores runs without one).

    Args:
        name: The reactor's name.
    """
    return any(getattr(lookup(name, version), "subject", None) is not None
               for version in versions(name))
