"""Reactors alive in this process, by name: workers, the sweeper and the surfaces resolve a
run's reactor here.

A name is declared in one place. Declaring it again from the same place — the same line of the
same code (module and qualified name), as when a notebook cell or a reloaded module runs again —
replaces the earlier reactor; declaring it from anywhere else (another line of that code too,
such as two declarations at a module's top level or in two lambdas) is a clash (`naming`).
"""

from __future__ import annotations

from reactorflow.definition import naming
from reactorflow.definition.reactor import Reactor

names = naming.names


def lookup(name: str) -> Reactor | None:
    """The `rf.Reactor` alive under `name` in this process, or `None`.

    Args:
        name: The reactor's name.
    """
    found = naming.find(name)
    return found if isinstance(found, Reactor) else None
