"""The names of the reactors alive in this process, and the declaration generation.

`registry.lookup` resolves a name to its `rf.Reactor` (workers find a run's reactor there);
this module holds the names themselves, typed by what it reads of a reactor (`Named`), so
the front registers itself here without this module knowing it.

A name is declared in one place. Declaring it again from the same place — the same line of the
same code (module and qualified name), as when a notebook cell or a reloaded module runs again —
replaces the earlier reactor; declaring it from anywhere else (another line of that code too,
such as two declarations at a module's top level or in two lambdas) is a clash.
"""

from __future__ import annotations

import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Protocol

from reactorflow.errors import DefinitionError


class Named(Protocol):
    """What the names read of a reactor (`rf.Reactor` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def origin(self) -> Origin: ...


_lock = threading.Lock()
_reactors: weakref.WeakValueDictionary[str, Named] = weakref.WeakValueDictionary()
_generation = 0
_PACKAGE = __name__.rpartition(".")[0] + "."  # reactorflow.definition.


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a reactor was declared: its module, the qualified name of the declaring code and
    the line (its identity: `place`), plus the file (to show; a notebook cell edited and run
    again has another file name, yet it is the same place)."""

    module: str
    qualname: str
    file: str
    line: int

    @property
    def place(self) -> tuple[str, str, int]:
        return self.module, self.qualname, self.line

    def __str__(self) -> str:
        scope = "" if self.qualname == "<module>" else f", in {self.qualname}"
        return f"{self.file}:{self.line} (module {self.module}{scope})"


def caller_origin() -> Origin:
    """The first frame outside this package's definition modules: the user's declaration."""
    frame = sys._getframe(1)
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith(
            _PACKAGE):
        frame = frame.f_back
    return Origin(str(frame.f_globals.get("__name__", "?")), frame.f_code.co_qualname,
                  frame.f_code.co_filename, frame.f_lineno)


def register(reactor: Named) -> None:
    """Record `reactor` under its name (replacing a reactor declared in the same place).

    Raises:
        DefinitionError: another place declared a reactor of that name; both are named.
    """
    with _lock:
        existing = _reactors.get(reactor.name)
        if existing is not None and existing is not reactor:
            old, new = existing.origin, reactor.origin
            if old.place != new.place:
                raise DefinitionError(
                    f"a reactor named {reactor.name!r} is declared in two places: {old} and "
                    f"{new}. A reactor's name is its durable identity, so give each reactor "
                    "its own name (a module imported twice, e.g. as __main__ and by its name, "
                    "also causes this)",
                    reactor=reactor.name,
                )
        _reactors[reactor.name] = reactor
    bump()


def find(name: str) -> Named | None:
    """The reactor alive under `name`, or `None` (`registry.lookup` gives it its type)."""
    with _lock:
        return _reactors.get(name)


def names() -> list[str]:
    """The names of the reactors alive in this process, sorted."""
    with _lock:
        return sorted(_reactors.keys())


def bump() -> None:
    """Record that some declaration changed (compiled plans are rebuilt on next use)."""
    global _generation
    _generation += 1


def generation() -> int:
    """The count of declaration changes so far (a compiled plan is valid for one)."""
    return _generation
