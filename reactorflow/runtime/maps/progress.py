"""How far a run's maps are: for each map step, its element count and how many of its elements
are done, failed, running (the dashboard's progress bar; `GET /api/runs/{id}` gives it as the
run's `maps`).

Read from what the map stores, never from the run's step records (elements never write there):

1. the element count: a fanned-out map's shared job data (`ElementArgs.count`), else the
   map's `step.started` event (`opened_detail`: "map of N elements"); a map not opened yet has
   no entry;
2. the outcomes, a page of slots per round trip (`PAGE_SIZE`), at most `MAX_PAGES` pages: each
   is completed (done), failed, undone or skipped; beyond that, the settled count
   (`count_elements`) fills `done`, and `exact` is False;
3. running: a fanned-out map's elements marked started that hold no outcome (read with the
   outcomes, the same page); an inline map's window (`batch_size`, or fewer elements left)
   while the map and its run are running.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from reactorflow import records
from reactorflow.definition.specs import StepKind
from reactorflow.mapresults import PAGE_SIZE
from reactorflow.records import decode_element
from reactorflow.runtime.engine.map_slot_keys import ARGS, job_key, starts_key
from reactorflow.status import EventKind, Status, StepStatus
from reactorflow.storage.contract.decoding import reading

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node, Plan
    from reactorflow.snapshot import Run
    from reactorflow.storage.contract.storage import Storage

MAX_PAGES = 40
"""The most pages of element slots read per map (20,000 elements at `PAGE_SIZE` 500)."""

_OPENED = re.compile(r"^map of (\d+) elements$")


def opened_detail(count: int) -> str:
    """The detail of a map's `step.started` event, naming its element count."""
    return f"map of {count} elements"


@dataclass(frozen=True, slots=True)
class MapProgress:
    """One map's elements: `total`, and how many are done (completed), failed, running, undone
    (rolled back) and skipped (never started: an atomic map stopped first). `exact` is False
    when the map is larger than `MAX_PAGES` pages: then `done` counts every settled element
    beyond those pages."""

    total: int
    done: int = 0
    failed: int = 0
    running: int = 0
    undone: int = 0
    skipped: int = 0
    exact: bool = True

    def form(self) -> dict[str, Any]:
        """As JSON: the fields by name."""
        return asdict(self)


def _opened_count(run: Run, key: str) -> int | None:
    """The element count the map's newest `step.started` event names, if any."""
    for entry in reversed(run.history):
        if entry.kind == EventKind.STEP_STARTED and entry.step == key:
            found = _OPENED.match(entry.detail)
            if found:
                return int(found.group(1))
    return None


async def _fanned_count(storage: Storage, run_id: str, key: str) -> int | None:
    raw = (await storage.load_elements(run_id, job_key(key), ARGS, 1))[0]
    if raw is None:
        return None
    with reading(run_id, f"the shared job data of map {key!r}"):
        return records.decode_element_args(raw).count


async def map_progress(storage: Storage, run: Run, node: Node) -> MapProgress | None:
    """The progress of map step `node` in `run`; None while it has not opened.

    Args:
        storage: The run's storage.
        run: The run (with its history).
        node: A map step of the run's plan.

    Raises:
        CorruptRecord: an element slot or the map's job data cannot be decoded.
        StorageError: The backend failed.
    """
    key = node.key
    options = node.spec.map
    assert options is not None
    shared = await _fanned_count(storage, run.id, key) if options.fan_out else None
    fanned = shared is not None  # its element jobs were given their data (else: inline so far)
    total = shared if shared is not None else _opened_count(run, key)
    if total is None:
        return None
    counts = {StepStatus.COMPLETED: 0, StepStatus.FAILED: 0, StepStatus.UNDONE: 0,
              StepStatus.SKIPPED: 0}
    running, read = 0, min(total, MAX_PAGES * PAGE_SIZE)
    for start in range(0, read, PAGE_SIZE):
        size = min(PAGE_SIZE, read - start)
        ranges = [(key, start, size)] + ([(starts_key(key), start, size)] if fanned else [])
        pages = await storage.load_element_ranges(run.id, ranges)
        marks = pages[1] if fanned else [None] * size
        with reading(run.id, f"element outcomes of map {key!r}"):
            for raw, mark in zip(pages[0], marks, strict=True):
                if raw is not None:
                    status = decode_element(raw).status
                    counts[status] = counts.get(status, 0) + 1
                elif mark is not None:
                    running += 1
    settled = sum(counts.values())
    beyond = 0
    if read < total:
        beyond = max(0, await storage.count_elements(run.id, key) - settled)
    step = run.steps.get(key)
    if not fanned and step is not None and step.status == StepStatus.RUNNING and (
            run.status is Status.RUNNING):
        running = min(options.batch_size, total - settled - beyond)
    return MapProgress(total, counts[StepStatus.COMPLETED] + beyond, counts[StepStatus.FAILED],
                       running, counts[StepStatus.UNDONE], counts[StepStatus.SKIPPED],
                       exact=read == total)


async def run_maps(storage: Storage, run: Run, plan: Plan | None) -> dict[str, MapProgress]:
    """Every opened map of the run's own steps (those of composed children included; maps
    nested in a map's elements live in their element's outcome, and are left out), by key.

    Args:
        storage: The run's storage.
        run: The run (with its history).
        plan: The plan of the run's version (None: not declared here, no maps known).

    Raises:
        CorruptRecord: an element slot or a map's job data cannot be decoded.
        StorageError: The backend failed.
    """
    if plan is None:
        return {}
    found: dict[str, MapProgress] = {}
    for key, node in plan.nodes.items():
        if node.kind is StepKind.MAP:
            progress = await map_progress(storage, run, node)
            if progress is not None:
                found[key] = progress
    return found
