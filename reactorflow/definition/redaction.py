"""Which parts of a declared type are secret (`Annotated[T, rf.Redacted]`), read once from the
annotations when a plan is built.

A *mask* is plain data, so it is stored with each run (a reader that does not import the
reactor's module still masks):

- `True`: the whole value is secret;
- a dict: a field's encoded name -> the mask of that field, and `"*"` -> the mask of every item
  of a list/tuple/set or every value of a dict.

Types are walked through Structs, dataclasses, TypedDicts, lists, tuples, sets, dicts, unions
(`T | None`) and `rf.Outcome[T]`; a recursive type is walked once.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from reactorflow.markers import Outcome, is_redacted
from reactorflow.redaction import EVERY, merge

Mask = bool | dict[str, Any]
_SEQUENCES = (list, tuple, set, frozenset)


def mask_of(annotation: Any) -> Mask | None:
    """The mask of a type (None: nothing in it is redacted)."""
    try:
        return _cached(annotation)
    except TypeError:  # an unhashable annotation: walk it uncached
        return _walk(annotation, ())


@functools.lru_cache(maxsize=512)
def _cached(annotation: Any) -> Mask | None:
    return _walk(annotation, ())


def _fields(tp: type) -> list[tuple[str, str]] | None:
    """(attribute name, encoded name) of a record type's fields; None when not a record."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        try:
            return [(f.name, f.encode_name) for f in msgspec.structs.fields(tp)]
        except (NameError, TypeError):  # unresolvable: msgspec refuses the type elsewhere
            return None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return [(f.name, f.name) for f in dataclasses.fields(tp)]
    if typing.is_typeddict(tp):
        return [(name, name) for name in tp.__annotations__]
    return None


def _walk(tp: Any, stack: tuple[Any, ...]) -> Mask | None:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *extras = typing.get_args(tp)
        return True if any(is_redacted(e) for e in extras) else _walk(base, stack)
    if origin is Outcome:
        inner = _walk(typing.get_args(tp)[0], stack)
        return {"value": inner} if inner is not None else None
    if origin in (typing.Union, types.UnionType):
        found: Mask | None = None
        for member in typing.get_args(tp):
            found = merge(found, _walk(member, stack))
        return found
    if origin in _SEQUENCES or origin is typing.Sequence:
        found = None
        for item in typing.get_args(tp):
            if item is not Ellipsis:
                found = merge(found, _walk(item, stack))
        return {EVERY: found} if found is not None else None
    if origin is dict or origin is Mapping:
        args = typing.get_args(tp)
        inner = _walk(args[1], stack) if len(args) == 2 else None
        return {EVERY: inner} if inner is not None else None
    if tp in stack:
        return None
    names = _fields(tp) if isinstance(tp, type) else None
    if not names:
        return None
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception:  # unresolvable annotations: msgspec refuses the type elsewhere
        return None
    mask: dict[str, Any] = {}
    for name, encoded in names:
        inner = _walk(hints.get(name, Any), (*stack, tp))
        if inner is not None:
            mask[encoded] = inner
    return mask or None


def at_path(mask: Mask | None, path: tuple[str, ...]) -> Mask | None:
    """The mask of the value at a dotted path into a masked value (an index takes `"*"`)."""
    for segment in path:
        if not isinstance(mask, dict):
            return mask
        named = None if segment.lstrip("-").isdigit() else mask.get(segment)
        mask = merge(named, mask.get(EVERY))
    return mask


@dataclass(frozen=True, slots=True)
class Redactions:
    """The masks of a reactor tree (see the module docstring); empty when nothing is redacted.

    `inputs`: the root inputs; `results`: node key -> its result (a map: its list of element
    results); `levels`: a composed child's key -> its inputs; `payloads`: interrupt key -> its
    payload; `elements`: map key -> one element's result."""

    inputs: Mask | None = None
    results: dict[str, Mask] = field(default_factory=dict)
    levels: dict[str, Mask] = field(default_factory=dict)
    payloads: dict[str, Mask] = field(default_factory=dict)
    elements: dict[str, Mask] = field(default_factory=dict)

    def of_source(self, level: str, ref: str, path: tuple[str, ...], *,
                  is_step: bool) -> Mask | None:
        """The mask of a value read from an input field or an earlier step of `level` (a
        parameter's source, or the list a map maps over), at `path` inside it."""
        if is_step:
            return at_path(self.results.get(f"{level}.{ref}" if level else ref), path)
        inputs = self.levels.get(level) if level else self.inputs
        return at_path(inputs, (ref, *path))

    def __bool__(self) -> bool:
        return bool(self.inputs or self.results or self.levels or self.payloads
                    or self.elements)


NONE = Redactions()
