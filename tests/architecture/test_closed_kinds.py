"""Event kinds, halt reasons, rollback handler kinds and middleware hook names are closed enums
(`rf.EventKind`, `rf.HaltReason`, `rf.HandlerKind`, `middleware.Hook`), not strings.

Checked on the source: every event the package builds (`Event(...)` or `execution.event(...)`)
names its kind as an `EventKind` member, and no string literal or f-string of the package
spells an event kind, a hook name or a handler's events outside the enums. Then: every member
is used, the stored bytes are the plain strings they were, and every exhaustive match answers
every member.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.definition.params import handler_receives
from reactorflow.middleware import Hook, Middleware
from reactorflow.runtime.engine.rollback import COMPENSATE_NAMES, UNDO_NAMES
from reactorflow.runtime.ops.snapshots import decode_history
from reactorflow.status import EventKind, HaltReason, HandlerKind

PACKAGE = Path(rf.__file__).resolve().parent
ENUMS = PACKAGE / "status.py"  # where the values are spelt, once
HOOKS = PACKAGE / "middleware.py"

KINDS = {k.value for k in EventKind}
FAMILIES = {k.value.partition(".")[0] for k in EventKind}
WHATS = {k.value.partition(".")[2] for k in EventKind}
HOOK_NAMES = {h.value for h in Hook}
HOOK_PREFIXES = {h.value.partition("_")[0] + "_" for h in Hook}  # before_, after_, on_


def _trees() -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}"


def _kind_argument(call: ast.Call) -> ast.expr | None:
    """The kind an event constructor is given: `Event(at, kind, ...)`, `event(kind, ...)`."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else (
        func.attr if isinstance(func, ast.Attribute) else "")
    position = {"Event": 1, "event": 0}.get(name)
    if position is None:
        return None
    for keyword in call.keywords:
        if keyword.arg == "kind":
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _rendered(node: ast.JoinedStr) -> str:
    """An f-string with `{}` for each replacement field."""
    return "".join(part.value if isinstance(part, ast.Constant) and isinstance(part.value, str)
                   else "{}" for part in node.values)


def _spells_a_kind(text: str) -> bool:
    """A literal that is, or builds, an event kind (`"run.parked"`, `"sleep.started"`,
    `f"{kind}.started"`): `family.what` with a known family or a known what."""
    match = re.fullmatch(r"(\{\}|[a-z_]+)\.(\{\}|[a-z_]+)", text)
    if match is None:
        return False
    family, what = match.groups()
    return family in FAMILIES or what in WHATS  # (a new family of a known verb too)


def _spells_a_hook(text: str) -> bool:
    """A literal that is, or builds, a hook name (`"after_step"`, `f"before_{kind}"`)."""
    return text in HOOK_NAMES or any(text == f"{prefix}{{}}" for prefix in HOOK_PREFIXES)


def test_every_event_built_names_its_kind_as_a_member() -> None:
    """An event's kind is an `EventKind.<MEMBER>` (or a variable mypy types as one), never a
    string or an expression that builds one."""
    found: list[str] = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            kind = _kind_argument(node)
            if kind is None:
                continue
            member = (isinstance(kind, ast.Attribute) and isinstance(kind.value, ast.Name)
                      and kind.value.id == "EventKind")
            if member:
                assert isinstance(kind, ast.Attribute)
                assert kind.attr in EventKind.__members__, _where(path, node)
            elif not isinstance(kind, ast.Name | ast.Attribute):
                found.append(f"{_where(path, node)}: {ast.unparse(kind)}")
    assert not found, f"events built with a kind that is not an EventKind member: {found}"


def test_no_event_kind_or_hook_name_is_spelt_outside_its_enum() -> None:
    """No string literal nor f-string of the package spells an event kind or a middleware
    hook name (a comparison `e.kind == "step.completed"`, a set of kinds, a `"before_step"`):
    they name the members. Docstrings and comments may mention them."""
    found: list[str] = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = _rendered(node)
            else:
                continue
            if path != ENUMS and _spells_a_kind(text):
                found.append(f"{_where(path, node)}: event kind {text!r}")
            if path != HOOKS and _spells_a_hook(text):
                found.append(f"{_where(path, node)}: hook name {text!r}")
    assert not found, found


def test_the_scan_sees_what_it_looks_for() -> None:
    """The two scans above flag each form they look for (so they cannot pass by seeing
    nothing)."""
    for text in ("run.parked", "sleep.started", "undo.completed", "{}.started", "undo.{}",
                 "history.unreadable"):
        assert _spells_a_kind(text), text
    for text in ("reactorflow.otel", "reactorflow.run.parked run_id=%s", "a.b.c", "{}.{}",
                 "step", "lib/run_write.lua"):
        assert not _spells_a_kind(text), text
    assert _spells_a_hook("before_step") and _spells_a_hook("after_{}")
    assert not _spells_a_hook("before") and not _spells_a_hook("inject")
    call = ast.parse('event("run.parked", key)').body[0]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    assert isinstance(_kind_argument(call.value), ast.Constant)
    call = ast.parse('Event(now, kind=f"{x}.started")').body[0]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    assert isinstance(_kind_argument(call.value), ast.JoinedStr)


def test_every_event_kind_is_written_somewhere() -> None:
    """Each member is named by the code that writes it (a member nobody writes is a stale
    promise in the docs)."""
    named = {node.attr for path, tree in _trees() if path != ENUMS for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
             and node.value.id == "EventKind"}
    rollback = {names.started.name for names in (UNDO_NAMES, COMPENSATE_NAMES)} | {
        names.completed.name for names in (UNDO_NAMES, COMPENSATE_NAMES)} | {
        names.failed.name for names in (UNDO_NAMES, COMPENSATE_NAMES)}
    assert set(EventKind.__members__) - named - rollback == set()


@pytest.mark.parametrize("kind", list(EventKind))
def test_an_event_kind_is_stored_as_its_plain_string(kind: EventKind) -> None:
    """Byte-identical history: a member encodes as the string it replaced, and a stored string
    reads back as the member, equal to that string."""
    event = rf.Event(12.5, kind, "charge", 2, "why")
    raw = records.encode(event)  # (the trailing "": its actor, a field appended later)
    assert raw == msgspec.msgpack.encode([12.5, kind.value, "charge", 2, "why", ""])
    back = records.decode_event(raw)
    assert back.kind is kind and back.kind == kind.value
    assert f"{back.kind}" == str(back.kind) == kind.value
    older = records.decode_event(msgspec.msgpack.encode([12.5, kind.value, "charge", 2, "why"]))
    assert older == back and older.kind is kind  # stored before the actor field: the same


def test_a_stored_kind_outside_the_enum_reads_back_as_its_string() -> None:
    """A kind this version does not know (a newer version wrote it) is kept as its string:
    the history stays readable, the known kinds around it are members."""
    good = records.encode(rf.Event(1.0, EventKind.RUN_STARTED))
    unknown = msgspec.msgpack.encode([2.0, "run.teleported", "", 0, "later"])
    events = decode_history("r-1", [good, unknown])
    assert [e.kind for e in events] == ["run.started", "run.teleported"]
    assert events[0].kind is EventKind.RUN_STARTED
    assert type(events[1].kind) is str and events[1].detail == "later"


def test_every_hook_names_a_middleware_method_and_back() -> None:
    """`Hooks.call` calls the method a `Hook` names: the members are exactly the hooks of
    `rf.Middleware` it calls (the job hooks `inject`/`job_context` have their own callers)."""
    methods = {name for name, value in vars(Middleware).items()
               if callable(value) and not name.startswith("_")}
    assert methods - HOOK_NAMES == {"inject", "job_context"}
    assert methods >= HOOK_NAMES


@pytest.mark.parametrize("kind", list(HandlerKind))
def test_every_handler_kind_says_what_its_handler_receives(kind: HandlerKind) -> None:
    """`params.handler_receives` matches every `HandlerKind` (the declaration error names it)."""
    assert handler_receives(kind)


def test_the_rollback_handlers_write_their_own_kinds_and_call_their_own_hooks() -> None:
    for names, kind in ((UNDO_NAMES, HandlerKind.UNDO), (COMPENSATE_NAMES,
                                                         HandlerKind.COMPENSATE)):
        assert (names.before, names.after) == (f"before_{kind}", f"after_{kind}")
        assert (names.started, names.completed, names.failed) == (
            f"{kind}.started", f"{kind}.completed", f"{kind}.failed")


def test_the_closed_enums_users_see_are_public() -> None:
    assert rf.EventKind is EventKind and rf.HaltReason is HaltReason
    assert rf.HandlerKind is HandlerKind
    assert HaltReason.PERIOD == "period" and EventKind.RUN_STARTED == "run.started"
