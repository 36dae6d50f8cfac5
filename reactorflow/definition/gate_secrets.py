"""Which names a gate key template may not read: values marked `rf.Redacted`.

A key is stored and shown (gate holders, `rf.GateBusy.key`, log lines, `run.steps[...].gate`),
so a template that formats a redacted value would leak it. `secret_masks` gives, for each name a
template may read, its redaction mask (see `definition.redaction`); `reads_secret` walks a
template field (`card`, `card.number`, `items[0]`) through it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import pydantic_types
from reactorflow.definition.params import Source
from reactorflow.definition.redaction import Mask, mask_of
from reactorflow.redaction import EVERY

if TYPE_CHECKING:
    from reactorflow.definition.params import Param

_PART = re.compile(r"\.([^.\[]+)|\[([^\]]*)\]")


def input_masks(inputs: Any) -> dict[str, Mask]:
    """Each redacted (or partly redacted) input field, by attribute name -> its mask."""
    mask = mask_of(inputs) if inputs is not None else None
    if mask is None:
        return {}
    names = _attribute_names(inputs)
    if not isinstance(mask, dict):
        return dict.fromkeys(names.values(), True) if mask else {}
    return {names.get(encoded, encoded): sub for encoded, sub in mask.items()}


def param_masks(inputs_type: Any, return_types: Mapping[str, Any],
                params: Sequence[Param]) -> dict[str, Mask]:
    """Each parameter of a step whose value is (partly) redacted: the input field it reads, or
    the declared return type of the (already declared) step it reads.

    Args:
        inputs_type: The reactor's inputs type (or `None`).
        return_types: The declared steps' return types, by step name.
        params: The step's parameters.
    """
    inputs = input_masks(inputs_type)
    found: dict[str, Mask] = {}
    for param in params:
        mask: Mask | None = None
        if param.source is Source.INPUT:
            mask = _walk(inputs.get(param.ref), param.path)
        elif param.source is Source.RESULT and param.ref in return_types:
            mask = _walk(mask_of(return_types[param.ref]), param.path)
        if mask is not None:
            found[param.name] = mask
    return found


def reads_secret(masks: Mapping[str, Mask], field: str) -> bool:
    """Whether template field `field` (`name`, `name.attr`, `name[0]`) formats a redacted
    value: it reaches a redacted part, or formats a whole value that contains one."""
    root = re.split(r"[.\[]", field, maxsplit=1)[0]
    mask: Any = masks.get(root)
    for attr, index in _PART.findall(field[len(root):]):
        if mask is None or mask is True:
            break
        mask = mask.get(attr) if attr else mask.get(EVERY, mask.get(index))
    return mask is not None and mask is not False and mask != {}


def _walk(mask: Any, path: Sequence[str]) -> Mask | None:
    for part in path:
        if mask is None or mask is True:
            break
        mask = mask.get(part)
    return mask  # type: ignore[no-any-return]


def _attribute_names(tp: Any) -> dict[str, str]:
    """encoded name -> attribute name of a record type's fields (identity when not renamed)."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return {f.encode_name: f.name for f in msgspec.structs.fields(tp)}
    if pydantic_types.is_model_type(tp):
        return {info.alias or name: name for name, info in tp.model_fields.items()}
    try:
        info = msgspec.inspect.type_info(tp)
    except Exception:
        return {}
    return {f.encode_name: f.name for f in getattr(info, "fields", ())}
