"""Reading a map's element outcomes from storage, a page at a time: for readers (`list[T]`,
`list[rf.Outcome[T]]`, `rf.MapResults[T]`), for a run's value, and for rollback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import records
from reactorflow.definition.graph import join
from reactorflow.definition.params import MapRead
from reactorflow.definition.specs import StepKind
from reactorflow.errors import KeyUnavailable
from reactorflow.mapresults import PAGE_SIZE, MapResults
from reactorflow.markers import Outcome
from reactorflow.protection import fields
from reactorflow.protection.errors import open_error, placeholder
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import plain_keys
from reactorflow.records import ElementRecord, RunError, decode_element
from reactorflow.redaction import masked
from reactorflow.status import Status, StepStatus
from reactorflow.storage.contract.decoding import reading
from reactorflow.storage.contract.maps import Slots

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node, Plan
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.snapshot import Run


def element_key(key: str, index: int) -> str:
    """How an element is named in messages and idempotency keys: `ship:3`."""
    return f"{key}:{index}"


SKIPPED = ElementRecord(StepStatus.SKIPPED)
"""How an element without a stored outcome reads (it never ran)."""


def element_count(ex: Execution, key: str) -> int:
    """The element count of a completed map (stored with its record)."""
    return int(msgspec.msgpack.decode(ex.records[key].result))


async def page(storage: Slots, run_id: str, key: str, start: int,
               count: int) -> list[ElementRecord]:
    """Element outcomes `start` .. `start + count - 1`, one round trip."""
    found = await storage.load_elements(run_id, key, start, count)
    with reading(run_id, f"element outcomes of map {key!r}"):
        return [SKIPPED if raw is None else decode_element(raw) for raw in found]


async def walk(storage: Slots, run_id: str, key: str, count: int, *,
               backwards: bool = False) -> AsyncIterator[tuple[int, ElementRecord]]:
    """Every element outcome with its index, in index order (or highest index first)."""
    starts = range(0, count, PAGE_SIZE)
    for start in reversed(starts) if backwards else starts:
        size = min(PAGE_SIZE, count - start)
        found = list(enumerate(await page(storage, run_id, key, start, size), start))
        for index, record in reversed(found) if backwards else found:
            yield index, record


def outcome(node: Node, index: int, record: ElementRecord, keys: RunKeys, *,
            shown: bool = False) -> Outcome[Any]:
    """What a reader sees of one element (its sealed values opened with `keys`; `shown`: a
    value without its key reads `"<encrypted>"`, as a snapshot shows it).

    Raises:
        KeyUnavailable: not `shown`, and a value is sealed under a key not held here.
        CorruptRecord: a sealed value fails authentication.
    """
    if record.status in (StepStatus.COMPLETED, StepStatus.UNDONE):
        try:
            clear = keys.open(fields.element_result(node.key, index), record.result)
        except KeyUnavailable as exc:
            if not shown:
                raise
            return Outcome(True, placeholder(exc))
        return Outcome(True, node.decoder.decode(clear))
    error = record.error
    if error is None:  # never started: an atomic map stopped first
        return Outcome(False, None, RunError(element_key(node.key, index), "Skipped",
                                             "the element never started"))
    error = open_error(keys, error, shown=shown)
    return Outcome(False, None, RunError(element_key(node.key, index), error.type,
                                         error.message, error.traceback))


def results_view(storage: Slots, keys: RunKeys, node: Node, count: int) -> MapResults[Any]:
    async def load(start: int, size: int) -> Sequence[Outcome[Any]]:
        found = await page(storage, keys.run_id, node.key, start, size)
        return [outcome(node, start + i, r, keys) for i, r in enumerate(found)]

    return MapResults(node.key, count, load)


async def load_list(storage: Slots, keys: RunKeys, node: Node, count: int,
                    read: MapRead, *, shown: bool = False) -> list[Any]:
    """Every element's result (VALUES) or outcome (OUTCOMES), in index order (`shown`: as a
    snapshot shows them, see `outcome`)."""
    found: list[Any] = []
    async for index, record in walk(storage, keys.run_id, node.key, count):
        seen = outcome(node, index, record, keys, shown=shown)
        found.append(seen if read is MapRead.OUTCOMES else seen.value)
    return found


async def prepare_readers(ex: Execution, node: Node) -> None:
    """Load the lists the step's map readers take (`list[T]`, `list[rf.Outcome[T]]`) into
    `ex.map_lists`, so that argument resolution stays synchronous."""
    for param in node.spec.params:
        if param.map_read is None or param.map_read is MapRead.LAZY:
            continue
        dep = join(node.level, param.ref)
        wanted = (dep, param.map_read)
        if wanted in ex.map_lists or ex.status_of(dep) != StepStatus.COMPLETED:
            continue
        ex.map_lists[wanted] = await load_list(ex.slots, ex.keys, ex.plan.nodes[dep],
                                               element_count(ex, dep), param.map_read)


def map_argument(ex: Execution, dep: str, read: MapRead) -> Any:
    """The value a map reader gets (loaded beforehand by `prepare_readers` unless lazy)."""
    if read is MapRead.LAZY:
        return results_view(ex.slots, ex.keys, ex.plan.nodes[dep], element_count(ex, dep))
    return ex.map_lists[(dep, read)]


async def with_map_value(run: Run, plan: Plan | None, storage: Slots, *,
                         keys: RunKeys | None = None) -> Run:
    """A completed run whose value is a map gets the list a reader would get (a value without
    its key: `"<encrypted>"`)."""
    if plan is None or run.status is not Status.COMPLETED:
        return run
    key = plan.levels[""].value_key
    node = plan.nodes.get(key) if key is not None else None
    if node is None or node.kind is not StepKind.MAP or not isinstance(run.value, int):
        return run
    options = node.spec.map
    assert options is not None
    read = MapRead.VALUES if options.atomic else MapRead.OUTCOMES
    keys = keys if keys is not None else plain_keys(run.id)
    value = await load_list(storage, keys, node, run.value, read, shown=True)
    return msgspec.structs.replace(run, value=masked(value, plan.redactions.results.get(node.key)))


async def map_value_raw(ex: Execution, key: str) -> msgspec.Raw | None:
    """The encoded list a map's reader gets, when `key` is a map (else None): what a composed
    child whose value is a map gives its parent."""
    node = ex.plan.nodes[key]
    if node.spec.map is None:
        return None
    read = MapRead.VALUES if node.spec.map.atomic else MapRead.OUTCOMES
    found = await load_list(ex.slots, ex.keys, node, element_count(ex, key), read)
    return records.raw(found)

