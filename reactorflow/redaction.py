"""Applying redaction masks (built by `definition.redaction` from `rf.Redacted` annotations) to
values and to text.

- `masked(value, mask)`: a copy of the value with every redacted part replaced by `"***"`; a
  Struct stays that Struct, a dataclass that dataclass; the value itself is never changed.
- `secrets_in(value, mask)`: the text forms of the redacted parts of a value.
- `scrub(text)`: `text` with every known secret of the runs executing in this context replaced
  by `"***"`. Every error text reactorflow records or logs is built by `records.describe` and
  `records.ErrorRecord.from_exception`, which scrub it. An execution of a run whose reactor
  redacts something declares itself a source of secrets for the context it runs in (`watch`);
  its step tasks inherit that context. Sources are held weakly: a finished execution's secrets
  go with it.

A secret shorter than `MIN_SECRET` characters (as text) is masked in values but not searched
for in text: it would match ordinary words and numbers everywhere.
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Protocol

import msgspec

from reactorflow import pydantic_types

REDACTED = "***"
MIN_SECRET = 3
EVERY = "*"


class SecretSource(Protocol):
    def secrets(self) -> Iterable[str]: ...


_sources: ContextVar[tuple[weakref.ref[Any], ...]] = ContextVar("reactorflow_secret_sources",
                                                                 default=())


def watch(source: SecretSource) -> None:
    """Make `source`'s secrets known to `scrub` in the current context (and the tasks it
    starts from now on)."""
    live = tuple(ref for ref in _sources.get() if ref() is not None and ref() is not source)
    _sources.set((*live, weakref.ref(source)))


def known_secrets() -> set[str]:
    """The secrets of every live source of this context (a source that fails is skipped:
    recording an error must never fail)."""
    found: set[str] = set()
    for ref in _sources.get():
        source = ref()
        if source is None:
            continue
        try:
            found.update(source.secrets())
        except Exception:  # a source that cannot tell adds nothing
            continue
    return found


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with each secret (`secrets`, else the context's known ones) replaced by `***`;
    the escaped form a `repr` shows is replaced too."""
    if secrets is None:
        if not _sources.get():
            return text
        secrets = known_secrets()
    forms: set[str] = set()
    for secret in secrets:
        forms.add(secret)
        forms.add(repr(secret)[1:-1])
    for form in sorted(forms, key=len, reverse=True):
        if len(form) >= MIN_SECRET and form in text:
            text = text.replace(form, REDACTED)
    return text


def merge(a: Any, b: Any) -> Any:
    """The mask hiding what either mask hides (None: nothing)."""
    if a is None or b is None:
        return a if b is None else b
    if a is True or b is True:
        return True
    merged = dict(a)
    for key, sub in b.items():
        merged[key] = merge(merged.get(key), sub)
    return merged


def masked(value: Any, mask: Any) -> Any:
    """A copy of `value` with the parts `mask` marks replaced by `"***"` (`value` itself when
    nothing is marked; None stays None: there is nothing to hide)."""
    if value is None or not mask:
        return value
    if mask is True:
        return REDACTED
    parts = _record_parts(value, mask)
    if parts is not None:
        changes = {name: masked(getattr(value, name), sub) for name, sub in parts}
        if not changes:
            return value
        if isinstance(value, msgspec.Struct):
            return msgspec.structs.replace(value, **changes)
        return _replaced(value, changes)
    every = mask.get(EVERY)
    if isinstance(value, Mapping):
        return {key: masked(item, merge(mask.get(str(key)), every))
                for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset) and every:
        return type(value)(masked(item, every) for item in value)
    return value


def secrets_in(value: Any, mask: Any) -> Iterator[str]:
    """The text forms of the parts of `value` that `mask` marks."""
    if mask is True:
        yield from _texts(value)
        return
    if not mask or value is None:
        return
    parts = _record_parts(value, mask)
    if parts is not None:
        for name, sub in parts:
            yield from secrets_in(getattr(value, name), sub)
        return
    every = mask.get(EVERY)
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from secrets_in(item, merge(mask.get(str(key)), every))
    elif isinstance(value, list | tuple | set | frozenset) and every:
        for item in value:
            yield from secrets_in(item, every)


def _record_parts(value: Any, mask: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """(attribute, its mask) of each masked field of a Struct or dataclass instance; None when
    `value` is neither (masks name fields as they are encoded)."""
    if isinstance(value, msgspec.Struct):
        return [(f.name, mask[f.encode_name]) for f in msgspec.structs.fields(value)
                if f.encode_name in mask]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, mask[f.name]) for f in dataclasses.fields(value) if f.name in mask]
    return None


def _texts(value: Any) -> Iterator[str]:
    """Every scalar of a value, as text (None and booleans say nothing)."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes | bytearray):
        yield bytes(value).decode("utf-8", "replace")
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, msgspec.Struct) or (
            dataclasses.is_dataclass(value) and not isinstance(value, type)):
        yield from _texts(pydantic_types.to_builtins(value))
    else:
        yield str(value)


def _replaced(value: Any, changes: dict[str, Any]) -> Any:
    """A dataclass instance with some fields changed (set on a shallow copy when its `__init__`
    refuses: a field it does not take, a `__post_init__` that rejects `"***"`)."""
    try:
        return dataclasses.replace(value, **changes)
    except Exception:
        clone = copy.copy(value)
        for name, item in changes.items():
            object.__setattr__(clone, name, item)
        return clone
