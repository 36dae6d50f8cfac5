"""The names of the reactors alive in this process, and the declaration generation.

`registry.lookup` resolves a name to its `rf.Reactor` (workers find a run's reactor there);
this module holds the names themselves, typed by what it reads of a reactor (`Named`), so
the front registers itself here without this module knowing it.

A name and version pair is declared in one place. Declaring it again from the same place — the
same line of the same code (module and qualified name), as when a notebook cell or a reloaded
module runs again — replaces the earlier reactor; declaring it from anywhere else (another line
of that code too, such as two declarations at a module's top level or in two lambdas) is a
clash. Versions of one name (`rf.Reactor(name, version=N)`) live side by side: `find(name)` is
the newest, which starts new runs; a stored run finds its own with `find(name, version)`.
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

    @property
    def version(self) -> int: ...


_lock = threading.Lock()
# name -> version -> reactor (weak: a reactor no module keeps is gone)
_reactors: dict[str, weakref.WeakValueDictionary[int, Named]] = {}
_generation = 0
# name -> (the generation it was found at, its newest version): `find(name)` without the lock
# while no declaration changed (weak too: a newest version no module keeps is looked up again)
_newest: dict[str, tuple[int, weakref.ref[Named]]] = {}
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
    """Record `reactor` under its name and version (replacing a reactor declared in the same
    place).

    Raises:
        DefinitionError: another place declared a reactor of that name and version; both are
            named.
    """
    with _lock:
        declared = _reactors.setdefault(reactor.name, weakref.WeakValueDictionary())
        existing = declared.get(reactor.version)
        if existing is not None and existing is not reactor:
            old, new = existing.origin, reactor.origin
            if old.place != new.place:
                at = "" if reactor.version == 1 else f" (version {reactor.version})"
                raise DefinitionError(
                    f"a reactor named {reactor.name!r}{at} is declared in two places: {old} "
                    f"and {new}. A reactor's name and version are its durable identity, so "
                    "give each reactor its own name, or a new version of a changed reactor "
                    "its own version=N (a module imported twice, e.g. as __main__ and by its "
                    "name, also causes this)",
                    reactor=reactor.name,
                )
        declared[reactor.version] = reactor
    bump()


def forget(reactor: Named) -> None:
    """Forget `reactor` (as a process that never imported its module would not know it): a
    test of a deploy declares the next version, or the same version changed, in its place."""
    with _lock:
        declared = _reactors.get(reactor.name)
        if declared is not None and declared.get(reactor.version) is reactor:
            del declared[reactor.version]
    bump()


def find(name: str, version: int | None = None) -> Named | None:
    """The reactor alive under `name` (at `version`; `None`: its newest version), or `None`
    (`registry.lookup` gives it its type)."""
    if version is None:
        cached = _newest.get(name)
        if cached is not None and cached[0] == _generation:
            found = cached[1]()
            if found is not None:
                return found
    with _lock:
        declared = _reactors.get(name)
        if declared is None:
            return None
        if version is not None:
            return declared.get(version)
        generation = _generation
        alive = list(declared.keys())
        newest = declared.get(max(alive)) if alive else None
        if newest is not None:
            _newest[name] = (generation, weakref.ref(newest))
        return newest


def versions(name: str) -> list[int]:
    """The versions of `name` declared in this process, lowest first."""
    with _lock:
        declared = _reactors.get(name)
        return sorted(declared.keys()) if declared is not None else []


def names() -> list[str]:
    """The names of the reactors alive in this process, sorted."""
    with _lock:
        return sorted(name for name, declared in _reactors.items() if len(declared))


def bump() -> None:
    """Record that some declaration changed (compiled plans are rebuilt on next use)."""
    global _generation
    _generation += 1


def generation() -> int:
    """The count of declaration changes so far (a compiled plan is valid for one)."""
    return _generation
