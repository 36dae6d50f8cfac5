"""Reactors alive in this process, by name (workers resolve a run's reactor here)."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from reactorflow.errors import DefinitionError

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

_lock = threading.Lock()
_reactors: weakref.WeakValueDictionary[str, Reactor] = weakref.WeakValueDictionary()
_generation = 0


def register(reactor: Reactor) -> None:
    with _lock:
        existing = _reactors.get(reactor.name)
        if existing is not None and existing is not reactor:
            raise DefinitionError(
                f"a reactor named {reactor.name!r} already exists in this process; a reactor's "
                "name is its durable identity, so give each reactor its own name (a module "
                "imported twice, e.g. as __main__ and by name, also causes this)",
                reactor=reactor.name,
            )
        _reactors[reactor.name] = reactor
    bump()


def lookup(name: str) -> Reactor | None:
    with _lock:
        return _reactors.get(name)


def names() -> list[str]:
    with _lock:
        return sorted(_reactors.keys())


def bump() -> None:
    """Record that some declaration changed (compiled plans are rebuilt on next use)."""
    global _generation
    _generation += 1


def generation() -> int:
    return _generation
