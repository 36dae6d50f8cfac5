"""Pydantic v2 models as declared types (`pip install reactorflow[pydantic]`): the one adapter
every place that takes a type goes through.

msgspec owns every byte that crosses a boundary. A model is converted at the edge, by msgspec's
hooks: `enc_hook` turns an instance into `model_dump(mode="json")` builtins, `dec_hook` turns
decoded builtins back into the model with `model_validate` (so a value round-trips to the
model's type, nested in Structs, lists and dicts too). A pydantic validation error is raised to
msgspec as a `ValueError` in msgspec's own "reason - at `$.path`" form, so the callers split it
into the field path and the reason like any other.

pydantic is never imported here: a class is a model only if pydantic is already in
`sys.modules` (a model class exists only once it was imported), so reactorflow imports, and
runs, without it.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

import msgspec

if TYPE_CHECKING:
    from pydantic import BaseModel


def _base_model() -> type[BaseModel] | None:
    module = sys.modules.get("pydantic")
    found = getattr(module, "BaseModel", None) if module is not None else None
    return found if isinstance(found, type) else None


def is_model_type(tp: Any) -> TypeGuard[type[BaseModel]]:
    """Whether `tp` is a pydantic `BaseModel` subclass (False when pydantic is not imported)."""
    base = _base_model()
    return base is not None and isinstance(tp, type) and issubclass(tp, base)


def is_model(value: Any) -> TypeGuard[BaseModel]:
    """Whether `value` is a pydantic model instance."""
    base = _base_model()
    return base is not None and isinstance(value, base)


def enc_hook(value: Any) -> Any:
    """msgspec's encoding hook: a model as its JSON-mode builtins.

    Raises:
        TypeError: `value` is no model, worded as msgspec's own refusal (a NotImplementedError
            would reach the caller as it is: msgspec does not translate it).
    """
    if is_model(value):
        return value.model_dump(mode="json")
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


def _path(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def dec_hook(tp: Any, obj: Any) -> Any:
    """msgspec's decoding hook: builtins validated into the model `tp`. Any other type is
    decoded as msgspec does without a hook: `object` takes any value, another class refuses it.

    Raises:
        ValueError: the value does not fit, as "reason - at `$.path`" (the first error; a
            missing field as msgspec words it), which msgspec wraps in its ValidationError.
        TypeError: `tp` is a class that is no model, worded as msgspec's own refusal (msgspec
            wraps it in its ValidationError; a NotImplementedError would reach the caller as
            it is).
    """
    if tp is object:  # (msgspec asks the hook about `object` too, which it decodes as any)
        return obj
    if not is_model_type(tp):
        raise TypeError(f"Expected `{getattr(tp, '__name__', tp)}`, got "
                        f"`{type(obj).__name__}`")
    if isinstance(obj, tp):
        return obj
    pydantic = sys.modules["pydantic"]
    try:
        return tp.model_validate(obj)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first.get("loc", ()))
        if first.get("type") == "missing" and loc:
            where = f" - at `${_path(loc[:-1])}`" if loc[:-1] else ""
            raise ValueError(f"Object missing required field `{loc[-1]}`{where}") from None
        where = f" - at `${_path(loc)}`" if loc else ""
        raise ValueError(f"{first.get('msg', 'invalid value')}{where}") from None


_encoder = msgspec.msgpack.Encoder(enc_hook=enc_hook)
encode: Callable[[Any], bytes] = _encoder.encode
"""MessagePack bytes of a user value (models converted by `enc_hook`)."""


def decoder(tp: Any) -> msgspec.msgpack.Decoder[Any]:
    """A MessagePack decoder of `tp` that validates the models inside it."""
    return msgspec.msgpack.Decoder(tp, dec_hook=dec_hook)


def decode(data: bytes, tp: Any) -> Any:
    """`data` decoded as `tp` (models validated).

    Raises:
        msgspec.ValidationError: the bytes do not fit `tp`.
    """
    return msgspec.msgpack.decode(data, type=tp, dec_hook=dec_hook)


def convert(value: Any, tp: Any) -> Any:
    """`value` (builtins) converted to `tp` by msgspec, the models inside validated by pydantic.

    Raises:
        msgspec.ValidationError: it does not fit (a model's error as msgspec's path form).
    """
    return msgspec.convert(value, type=tp, dec_hook=dec_hook)


def to_builtins(value: Any) -> Any:
    """`value` as JSON-ready builtins (models as `model_dump(mode="json")`)."""
    return msgspec.to_builtins(value, enc_hook=enc_hook)


def fields(tp: type[BaseModel]) -> dict[str, Any]:
    """A model's fields as they may be named in a mapping (each field's alias, and its name)
    -> their annotation."""
    found: dict[str, Any] = {}
    for name, info in tp.model_fields.items():
        found[name] = info.annotation
        if info.alias:
            found[info.alias] = info.annotation
    return found


def allows_extra(tp: type[BaseModel]) -> bool:
    """Whether the model takes fields it does not declare (`extra="allow"`)."""
    return tp.model_config.get("extra") == "allow"


def unstorable(tp: type[BaseModel]) -> tuple[str, str] | None:
    """The first field of a model that cannot round-trip through JSON (an arbitrary type: no
    JSON form, so pydantic has no JSON Schema for it), as (field path, why); None when every
    field round-trips."""
    pydantic = sys.modules["pydantic"]
    try:
        tp.model_json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticInvalidForJsonSchema, TypeError,
            ValueError) as whole:
        for name, info in tp.model_fields.items():
            annotation = info.annotation
            if is_model_type(annotation):
                inner = unstorable(annotation)
                if inner is not None:
                    return f"{name}.{inner[0]}", inner[1]
                continue
            try:
                pydantic.TypeAdapter(
                    annotation, config=pydantic.ConfigDict(arbitrary_types_allowed=True)
                ).json_schema()
            except (pydantic.PydanticUserError, pydantic.PydanticInvalidForJsonSchema,
                    TypeError, ValueError) as exc:
                shown = getattr(annotation, "__name__", repr(annotation))
                return name, f"{shown} has no JSON form: {str(exc).splitlines()[0]}"
        return "(the whole model)", str(whole).splitlines()[0]
    return None


@functools.cache
def _generator() -> type[Any]:
    json_schema = importlib.import_module("pydantic.json_schema")  # (pydantic is imported)

    class _Untitled(json_schema.GenerateJsonSchema):  # type: ignore[name-defined,misc]
        """pydantic's generator without the titles it makes up from field names (a form
        labels a field by its name, as msgspec's schemas leave it; a `Field(title=...)`
        stays)."""

        def field_title_should_be_set(self, schema: Any) -> bool:
            return False

    return _Untitled


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of `tp` (msgspec's), each model in it described by pydantic's
    `model_json_schema()`: every definition, msgspec's and pydantic's, under the root's
    `$defs`, referenced as `#/$defs/<name>` (as the dashboard's forms resolve them).

    Raises:
        TypeError: a type in `tp` has no JSON Schema, or its annotations name something its
            module no longer defines (a forward reference that cannot be resolved).
    """
    defs: dict[str, Any] = {}

    def hook(inner: Any) -> dict[str, Any]:
        if not is_model_type(inner):
            raise NotImplementedError
        described = inner.model_json_schema(ref_template="#/$defs/{model}",
                                            schema_generator=_generator())
        defs.update(described.pop("$defs", {}))
        name = inner.__name__
        defs[name] = described
        return {"$ref": f"#/$defs/{name}"}

    try:
        schema: dict[str, Any] = msgspec.json.schema(tp, schema_hook=hook)
    except NameError as exc:
        raise TypeError(f"{tp!r} has no JSON Schema: its annotations name {exc.name!r}, which "
                        "cannot be resolved (import it in the type's module, not only under "
                        "TYPE_CHECKING)") from exc
    if defs:
        schema.setdefault("$defs", {}).update(defs)
    return schema
