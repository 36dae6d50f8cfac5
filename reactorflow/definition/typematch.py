"""Refusing, at the decorator line, a parameter whose annotation contradicts its source's type.

A step's arguments are passed as their sources hold them (an input field as the inputs type
decoded it, a step's result as its return annotation decoded it); nothing converts them to
the parameter's annotation. So `amount: str` reading a `float` input receives a float, and the
step fails at run time (an `AttributeError` on `amount.upper()`). The check refuses that
where both types are concrete and msgspec would not convert one into the other, and lets
everything else through: `Any`, type variables, custom classes, enums, unions that share a
member, `int` into `float` and `bool` into `int`, a subclass into its base, a list into a
tuple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow.definition.params import Param, Source
from reactorflow.definition.specs import StepKind
from reactorflow.errors import DefinitionError

if TYPE_CHECKING:
    from reactorflow.definition.table import StepTable

Info = msgspec.inspect.Type

_KINDS: tuple[tuple[type[Info], str], ...] = (
    (msgspec.inspect.BoolType, "bool"), (msgspec.inspect.IntType, "int"),
    (msgspec.inspect.FloatType, "float"), (msgspec.inspect.StrType, "str"),
    (msgspec.inspect.BytesType, "bytes"), (msgspec.inspect.ByteArrayType, "bytes"),
    (msgspec.inspect.NoneType, "none"), (msgspec.inspect.DateTimeType, "datetime"),
    (msgspec.inspect.DateType, "date"), (msgspec.inspect.TimeType, "time"),
    (msgspec.inspect.TimeDeltaType, "timedelta"), (msgspec.inspect.UUIDType, "uuid"),
    (msgspec.inspect.ListType, "array"), (msgspec.inspect.VarTupleType, "array"),
    (msgspec.inspect.TupleType, "array"), (msgspec.inspect.SetType, "array"),
    (msgspec.inspect.FrozenSetType, "array"), (msgspec.inspect.DictType, "mapping"),
    (msgspec.inspect.TypedDictType, "mapping"), (msgspec.inspect.StructType, "record"),
    (msgspec.inspect.DataclassType, "record"),
)
"""The concrete kinds judged; any other type (Any, custom classes, enums, decimals, ...) is
never called a contradiction."""

_WIDENS = frozenset({("int", "float"), ("bool", "int"), ("bool", "float"),
                     ("datetime", "date")})
"""A value of the first kind serves where the second is annotated (msgspec converts an int to
a float; a bool is an int, a datetime a date, in Python)."""

_READ_AS_RETURNED = frozenset({StepKind.STEP, StepKind.INTERRUPT, StepKind.ASYNC_STEP,
                               StepKind.SLEEP})  # (a sleep's: datetime, see declare)
"""Step kinds whose readers receive the value typed by the function's return annotation."""


def _info(annotation: Any) -> Info | None:
    """msgspec's view of `annotation`, or None when it has none (a type it cannot inspect, or
    one whose own annotations do not resolve: such a type is not judged here)."""
    try:
        return msgspec.inspect.type_info(annotation)
    except Exception:
        return None


def _plain(info: Info) -> Info:
    while isinstance(info, msgspec.inspect.Metadata):
        info = info.type
    return info


def _kind(info: Info) -> str | None:
    if isinstance(info, msgspec.inspect.LiteralType):
        kinds = {type(v) for v in info.values}
        if len(kinds) == 1:
            return {bool: "bool", int: "int", str: "str"}.get(kinds.pop())
        return None
    return next((kind for cls, kind in _KINDS if isinstance(info, cls)), None)


def _items(info: Info) -> Info | None:
    item = getattr(info, "item_type", None)
    return item if isinstance(item, msgspec.inspect.Type) else None


def fits(source: Info, target: Info) -> bool:
    """Whether a value of type `source` may be what a parameter annotated `target` receives:
    False only when both are concrete and they contradict each other."""
    source, target = _plain(source), _plain(target)
    if isinstance(target, msgspec.inspect.UnionType):
        return any(fits(source, member) for member in target.types)
    if isinstance(source, msgspec.inspect.UnionType):
        return any(fits(member, target) for member in source.types)
    have, want = _kind(source), _kind(target)
    if have is None or want is None:
        return True
    if have != want:
        return (have, want) in _WIDENS
    if have == "array":
        inner, wanted = _items(source), _items(target)
        return inner is None or wanted is None or fits(inner, wanted)
    if have == "mapping":
        if isinstance(source, msgspec.inspect.DictType) and isinstance(
                target, msgspec.inspect.DictType):
            return fits(source.value_type, target.value_type)
        return True
    if have == "record":
        base, cls = getattr(target, "cls", None), getattr(source, "cls", None)
        return not isinstance(base, type) or not isinstance(cls, type) or issubclass(cls, base)
    return True


def _descend(info: Info | None, path: Sequence[str]) -> Info | None:
    """The type at `path` inside `info` (through record fields and dict values), or None when
    the path leads where no type is known."""
    for name in path:
        if info is None:
            return None
        info = _plain(info)
        if isinstance(info, msgspec.inspect.StructType | msgspec.inspect.DataclassType
                      | msgspec.inspect.TypedDictType):
            info = next((f.type for f in info.fields if name in (f.name, f.encode_name)), None)
        elif isinstance(info, msgspec.inspect.DictType):
            info = info.value_type
        else:
            return None
    return info


def source_type(reactor: StepTable, param: Param) -> tuple[Info, str] | None:
    """The type of the value `param` receives and how to name its source, when known."""
    if param.outcome or param.map_read is not None:
        return None  # the map and async-unit readers have their own checks
    if param.source is Source.INPUT and reactor.inputs is not None:
        inputs = _info(reactor.inputs)
        found = _descend(inputs, (param.ref, *param.path))
        shown = ".".join((param.ref, *param.path))
        return (found, f"input {shown!r}") if found is not None else None
    if param.source is Source.RESULT:
        spec = reactor.steps.get(param.ref)
        if spec is None or spec.kind not in _READ_AS_RETURNED or spec.map is not None:
            return None
        found = _descend(_info(spec.return_type), param.path)
        shown = ".".join((param.ref, *param.path))
        what = f"the result of {spec.kind.value} {param.ref!r}" if not param.path else (
            f"{shown!r} in the result of {spec.kind.value} {param.ref!r}")
        return (found, what) if found is not None else None
    return None


_CONTAINERS = ((msgspec.inspect.ListType, "list"), (msgspec.inspect.SetType, "set"),
               (msgspec.inspect.FrozenSetType, "frozenset"))


def _shown(info: Info) -> str:
    """A type as Python spells it (`list[str]`, `dict[str, int]`, `Order`, `float | None`)."""
    info = _plain(info)
    for container, name in _CONTAINERS:
        if isinstance(info, container):
            return f"{name}[{_shown(info.item_type)}]"
    if isinstance(info, msgspec.inspect.VarTupleType):
        return f"tuple[{_shown(info.item_type)}, ...]"
    if isinstance(info, msgspec.inspect.TupleType):
        return f"tuple[{', '.join(_shown(t) for t in info.item_types)}]"
    if isinstance(info, msgspec.inspect.DictType):
        return f"dict[{_shown(info.key_type)}, {_shown(info.value_type)}]"
    if isinstance(info, msgspec.inspect.UnionType):
        return " | ".join(_shown(t) for t in info.types)
    if isinstance(info, msgspec.inspect.LiteralType):
        return f"Literal[{', '.join(repr(v) for v in info.values)}]"
    if isinstance(info, msgspec.inspect.NoneType):
        return "None"
    named = getattr(info, "cls", None)
    if isinstance(named, type):
        return named.__name__
    return type(info).__name__.removesuffix("Type").lower()


def element_type(reactor: StepTable, over: str) -> tuple[Info, str] | None:
    """The type of one element of the list a map step maps (`over`), when known."""
    if over in reactor.input_names and reactor.inputs is not None:
        found, what = _descend(_info(reactor.inputs), (over,)), f"input {over!r}"
    else:
        spec = reactor.steps.get(over)
        if spec is None or spec.kind not in _READ_AS_RETURNED or spec.map is not None:
            return None
        found, what = _info(spec.return_type), f"the result of {spec.kind.value} {over!r}"
    items = _items(_plain(found)) if found is not None else None
    return (items, f"an element of {what}") if items is not None else None


def check_param_types(reactor: StepTable, params: Sequence[Param], where: str, step: str, *,
                      over: str | None = None) -> None:
    """Refuse a parameter whose annotation contradicts the type of what it reads (for a map
    step, `over` is what it maps: its first parameter receives one element of it).

    Raises:
        DefinitionError: naming the parameter, its annotation and its source's type.
    """
    for param in params:
        if param.annotation is Any:
            continue
        if param.source is Source.ELEMENT:
            found = element_type(reactor, over) if over is not None else None
        else:
            found = source_type(reactor, param)
        wanted = _info(param.annotation)
        if found is None or wanted is None:
            continue
        info, what = found
        if not fits(info, wanted):
            raise DefinitionError(
                f"{where}: parameter {param.name!r} is annotated {_name(param.annotation)} but "
                f"receives {what}, a {_shown(info)}; nothing converts it, so the step would get "
                f"a {_shown(info)}. Annotate it with that type (or leave it unannotated)",
                reactor=reactor.name, step=step)


def _name(annotation: Any) -> str:
    return annotation.__name__ if isinstance(annotation, type) else repr(annotation)
