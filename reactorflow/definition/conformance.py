"""Conforming a value to a declared type with msgspec: a reactor's inputs (before anything is
stored), a composed child's inputs, an interrupt's payload (and its `on_timeout=` payload,
at declaration). Pure: no storage, no runtime; the runtime's `engine/inputs` turns a
rejection into `InputValidationError`, `ops/resume` into `PayloadValidationError`.

A declared type is a msgspec.Struct, a dataclass, a TypedDict or a pydantic model (a payload may
also be builtins); a model is validated by pydantic, through `reactorflow.pydantic_types`.
The same rules hold everywhere a type is taken:

1. An instance of the type itself is turned back into builtins, so that it is validated like
   any other value (its constraints hold).
2. A mapping given for a type with named fields may name only those fields, at any depth: an
   unknown field is refused, naming it by path and listing the fields (msgspec's
   `forbid_unknown_fields` semantics).
3. msgspec converts the value; its error is split into the field path and the reason, and a
   missing field is reported under its own name. A reason that quotes a value marked
   `rf.Redacted` in the type (msgspec names a bad enum value) has it scrubbed.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from reactorflow import pydantic_types
from reactorflow.definition.redaction import mask_of
from reactorflow.redaction import scrub, secrets_in

WHOLE = "(the whole value)"
_PATH = re.compile(r"^(?P<reason>.*?)(?P<paths>(?: - at `\$[^`]*`)*)$", re.DOTALL)
_AT = re.compile(r" - at `\$([^`]*)`")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]*)`$")


class Rejected(Exception):  # internal: always turned into a ReactorflowError
    """A value failed validation: the field path and the reason (never escapes this package)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def split_validation_error(error: msgspec.ValidationError) -> tuple[str, str]:
    """msgspec's message as (field path, reason): "Expected `int`, got `str` - at `$.a`"; a
    missing field is named itself ("Object missing required field `b` - at `$.a`" -> a.b). A
    pydantic model's error inside the value carries its own path, before msgspec's ("... - at
    `$.b` - at `$.a`" -> a.b)."""
    match = _PATH.match(str(error))
    assert match is not None
    path = "".join(reversed(_AT.findall(match.group("paths")))).lstrip(".")
    reason = match.group("reason")
    missing = _MISSING.match(reason)
    if missing is not None:
        name = missing.group("name")
        return (f"{path}.{name}" if path else name), "a required field is missing"
    return path or WHOLE, reason


_RECORDS = (msgspec.inspect.StructType, msgspec.inspect.DataclassType,
            msgspec.inspect.TypedDictType)


@functools.lru_cache(maxsize=256)
def _type_info(schema: Any) -> msgspec.inspect.Type | None:
    try:
        return msgspec.inspect.type_info(schema)
    except (TypeError, ValueError):
        return None


_NESTING = (*_RECORDS, msgspec.inspect.CollectionType, msgspec.inspect.TupleType,
            msgspec.inspect.DictType, msgspec.inspect.UnionType, msgspec.inspect.Metadata,
            msgspec.inspect.CustomType)


def _at(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def check_fields(value: Any, info: msgspec.inspect.Type, path: str = "") -> None:
    """Refuse a mapping that names a field its Struct, dataclass or TypedDict does not declare,
    at any depth (through lists, tuples, dicts and optional values).

    Raises:
        Rejected: naming the unknown field(s) by path and listing the declared ones.
    """
    while isinstance(info, msgspec.inspect.Metadata):
        info = info.type
    if isinstance(info, msgspec.inspect.CustomType) and pydantic_types.is_model_type(info.cls):
        model = info.cls
        if not isinstance(value, Mapping) or pydantic_types.allows_extra(model):
            return
        declared = pydantic_types.fields(model)
        unknown = [str(key) for key in value if key not in declared]
        if unknown:
            label = "an unknown field" if len(unknown) == 1 else "unknown fields"
            owner = f" of {model.__name__}" if path else ""
            raise Rejected(", ".join(_at(path, name) for name in unknown),
                           f"{label}; the fields{owner} are: {', '.join(model.model_fields)}")
        for key, item in value.items():
            try:
                inner = _type_info(declared[key])
            except TypeError:  # an annotation that cannot be hashed: pydantic judges it
                continue
            if inner is not None:
                check_fields(item, inner, _at(path, str(key)))
    elif isinstance(info, _RECORDS):
        if not isinstance(value, Mapping):
            return  # not an object at all: msgspec says so
        fields = {f.encode_name: f.type for f in info.fields}
        unknown = [str(key) for key in value if key not in fields]
        if unknown:
            label = "an unknown field" if len(unknown) == 1 else "unknown fields"
            owner = f" of {info.cls.__name__}" if path else ""
            raise Rejected(", ".join(_at(path, name) for name in unknown),
                           f"{label}; the fields{owner} are: {', '.join(fields) or 'none'}")
        for key, item in value.items():
            check_fields(item, fields[key], _at(path, str(key)))
    elif isinstance(info, msgspec.inspect.CollectionType) and isinstance(value, list | tuple):
        if not isinstance(info.item_type, _NESTING):
            return  # items of a plain type (a long list of numbers is not walked)
        for index, item in enumerate(value):
            check_fields(item, info.item_type, f"{path}[{index}]")
    elif isinstance(info, msgspec.inspect.TupleType) and isinstance(value, list | tuple):
        for index, (item, item_type) in enumerate(zip(value, info.item_types, strict=False)):
            check_fields(item, item_type, f"{path}[{index}]")
    elif isinstance(info, msgspec.inspect.DictType) and isinstance(value, Mapping):
        if not isinstance(info.value_type, _NESTING):
            return
        for key, item in value.items():
            check_fields(item, info.value_type, f"{path}[{key!r}]")
    elif isinstance(info, msgspec.inspect.UnionType) and isinstance(value, Mapping):
        records = [t for t in info.types if isinstance(t, _RECORDS) or (
            isinstance(t, msgspec.inspect.CustomType) and pydantic_types.is_model_type(t.cls))]
        if len(records) == 1:  # e.g. `Item | None` (several records: tagged, msgspec decides)
            check_fields(value, records[0], path)


def is_instance(value: Any, schema: Any) -> bool:
    """`value` is a Struct, dataclass or pydantic model instance of `schema` (never an
    isinstance on a TypedDict or a generic alias, which raise TypeError)."""
    if not isinstance(value, msgspec.Struct) and not pydantic_types.is_model(value) and not (
            dataclasses.is_dataclass(value) and not isinstance(value, type)):
        return False
    try:
        return isinstance(schema, type) and issubclass(type(value), schema)
    except TypeError:
        return False


_SCALARS = frozenset({int, float, str, bool, bytes})
"""Schemas a value of exactly that type conforms to as it is."""


def conform(value: Any, schema: Any) -> Any:
    """`value` converted to `schema` by the rules in this module's docstring.

    Raises:
        Rejected: the value does not fit (its field path and the reason).
    """
    if type(value) is schema and schema in _SCALARS:
        return value  # (what the conversion would return)
    if is_instance(value, schema):
        value = pydantic_types.to_builtins(value)
    info = _type_info(schema)
    if info is not None:
        check_fields(value, info)
    try:
        return pydantic_types.convert(value, schema)
    except msgspec.ValidationError as exc:
        field, reason = split_validation_error(exc)
        mask = mask_of(schema)
        if mask is None:
            raise Rejected(field, reason) from exc
        raise Rejected(field, scrub(reason, secrets_in(value, mask))) from None
