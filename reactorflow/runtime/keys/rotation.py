"""`reactorflow keys rotate --to NEW` and `keys check`: re-sealing every stored value under the
codec's current key, so that an old key can be retired, and counting values per key id.

Rotation, in order (each step resumable: a value or a key already under NEW is never touched
again, so a rotation interrupted at any point — a SIGINT, a SIGKILL — and run again goes on
where it stopped, with nothing lost and nothing sealed twice):
1. The process's codec must seal with NEW already (`current="NEW"`, the old keys still
   listed): every process is deployed so first, so that no live run writes under an old key
   while the rotation runs.
2. Subjects' data keys: each wrapped under another key is re-wrapped under NEW by
   compare-and-set (`Storage.replace_subject_key`); the values of a subject's runs are sealed
   under its data key, which does not change, so they need no re-sealing.
3. Runs, every reactor's, newest first, in batches (`Storage.list_runs`): a run's records are
   read; each value sealed under a codec key other than NEW is opened and sealed again under
   NEW, bound to the same run and field; the records that changed are written back in one
   compare-and-set (`Storage.reseal_run`) — a run in flight keeps running, and a record it
   wrote since the read is never overwritten: the run is read again and retried (after
   `ATTEMPTS` tries it is reported busy, for the next pass). Map element slots (outcomes,
   items, shared arguments) are re-sealed slot by slot, each by compare-and-set too.
4. Progress is reported after each batch.

A value this process holds no key for, or one that fails authentication, is left as it is and
reported (a run that cannot be read at all is reported too); nothing else stops a rotation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import msgspec

from reactorflow import records
from reactorflow.errors import ConfigurationError, CorruptRecord, KeyUnavailable
from reactorflow.protection import envelope, fields
from reactorflow.protection.codec import DATA_KEY_PREFIX, EncryptionCodec
from reactorflow.protection.keys import RunKeys
from reactorflow.runtime.engine.map_slot_keys import ARGS, items_key, job_key
from reactorflow.runtime.keys import walk
from reactorflow.runtime.subjects import data_keys
from reactorflow.storage.contract.maps import LOAD_LIMIT
from reactorflow.storage.contract.resealing import Reseal, Swap
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import RunPageData, StoredRun

ATTEMPTS = 5
"""Times a run whose records changed under a rotation is read again and retried."""
BATCH = 100
"""Runs (and subjects) a rotation reads per batch, by default."""


@dataclass(slots=True)
class Progress:
    """How far a rotation (or a check) got.

    Attributes:
        runs: Runs read.
        runs_resealed: Runs with at least one value re-sealed.
        values: Values re-sealed (or, for a check, counted).
        data_keys: Subjects' data keys re-wrapped (or, for a check, counted).
        busy: Runs that changed under every attempt (run the rotation again).
        unreadable: Runs or values left as they are: no key for them, or they fail
            authentication (`(run id, why)`).
    """

    runs: int = 0
    runs_resealed: int = 0
    values: int = 0
    data_keys: int = 0
    busy: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)


Report = Callable[[Progress], None]


def check_target(codec: EncryptionCodec | None, to: str) -> EncryptionCodec:
    """The codec a rotation to `to` runs with.

    Raises:
        ConfigurationError: no codec is configured, or it does not seal with `to` yet (the
            message says what to configure first; a key is never printed).
    """
    if codec is None:
        raise ConfigurationError(
            "keys rotate needs the codec: configure rf.configure(codec=rf.EncryptionCodec("
            f"keys=..., current={to!r})) in a module given with --app (or REACTORFLOW_APP)",
            option="codec")
    if to not in codec.key_ids:
        raise ConfigurationError(
            f"keys rotate --to {to!r}: the configured codec holds no key {to!r} (it holds "
            f"{', '.join(map(repr, codec.key_ids))}); add it to keys= with current={to!r}",
            option="codec")
    if codec.current != to:
        raise ConfigurationError(
            f"keys rotate --to {to!r}: the configured codec still seals with "
            f"{codec.current!r}; deploy every process with current={to!r} first (keeping the "
            "old keys listed, so they still open old values), then rotate", option="codec")
    return codec


class _Resealer:
    """Re-seals the values of one run that are under a codec key other than the current."""

    def __init__(self, codec: EncryptionCodec, run_id: str, progress: Progress) -> None:
        self.keys = RunKeys(run_id, codec)
        self.current = codec.current
        self.run_id = run_id
        self.progress = progress
        self.count = 0

    def _old(self, key_id: str | None) -> bool:
        return (key_id is not None and key_id != self.current
                and not key_id.startswith(DATA_KEY_PREFIX))

    def value(self, name: str, data: bytes) -> bytes:
        if not self._old(envelope.key_id_of(data)):
            return data
        try:
            again = self.keys.seal(name, self.keys.open(name, data))
        except (KeyUnavailable, CorruptRecord) as exc:
            self.progress.unreadable.append((self.run_id, str(exc)))
            return data
        self.count += 1
        return again

    def text(self, text: str) -> str:
        if not text or not self._old(envelope.key_id_of(text)):
            return text
        try:
            again = self.keys.seal_text(fields.ERROR, self.keys.open_text(fields.ERROR, text))
        except (KeyUnavailable, CorruptRecord) as exc:
            self.progress.unreadable.append((self.run_id, str(exc)))
            return text
        self.count += 1
        return again


def run_reseal(stored: StoredRun, visit: walk.Bytes, text: walk.Text) -> Reseal:
    """What to write back for one run read (its meta, state, steps, claims and history), each
    value as `visit` and each error text as `text` return it."""
    head = stored.head
    swaps: dict[str, Swap] = {}
    meta = records.decode_meta(head.meta)
    if (again := walk.meta(visit, meta)) is not meta:
        swaps["meta"] = (head.meta, records.encode(again))
    state = records.decode_state(head.state)
    if (again_state := walk.state(text, state)) is not state:
        swaps["state"] = (head.state, records.encode(again_state))
    steps: dict[str, Swap] = {}
    for key, raw in stored.steps.items():
        record = records.decode_step(raw)
        if (again_step := walk.step(visit, text, key, record)) is not record:
            steps[key] = (raw, records.encode(again_step))
    claims = {key: (raw, new) for key, raw in (stored.claims or {}).items()
              if (new := visit(fields.claim(key), raw)) is not raw}
    events: list[Swap] = []
    for raw in stored.history or ():
        event = records.decode_event(raw)
        if (again_event := walk.event(text, event)) is not event:
            events.append((raw, records.encode(again_event)))
    return Reseal(head=swaps, steps=steps, claims=claims, events=events)


async def _slots(storage: Storage, run_id: str, key: str) -> dict[int, bytes]:
    """Every filled slot of element-slot map `key` (read page by page)."""
    wanted = await storage.count_elements(run_id, key)
    found: dict[int, bytes] = {}
    start = 0
    while len(found) < wanted and start < wanted * 4 + LOAD_LIMIT:
        page = await storage.load_elements(run_id, key, start, LOAD_LIMIT)
        found.update({start + i: raw for i, raw in enumerate(page) if raw is not None})
        start += LOAD_LIMIT
    return found


async def element_reseal(storage: Storage, run_id: str, map_keys: list[str],
                         visit: walk.Bytes, text: walk.Text) -> dict[str, dict[int, Swap]]:
    """What to write back of the element slots of the maps among `map_keys` of one run (a step
    key with no element slots has none), as `run_reseal` says."""
    elements: dict[str, dict[int, Swap]] = {}
    for key in map_keys:
        outcomes = {}
        for index, raw in (await _slots(storage, run_id, key)).items():
            record = records.decode_element(raw)
            if (again := walk.element(visit, text, key, index, record)) is not record:
                outcomes[index] = (raw, records.encode(again))
        items = {index: (raw, new) for index, raw in
                 (await _slots(storage, run_id, items_key(key))).items()
                 if (new := visit(fields.item(key, index), raw)) is not raw}
        shared = {}
        for index, raw in (await _slots(storage, run_id, job_key(key))).items():
            if index != ARGS:
                continue
            args = records.decode_element_args(raw)
            values = {name: walk.raw(visit, fields.argument(key, name), value)
                      for name, value in args.values.items()}
            if any(values[n] is not args.values[n] for n in values):
                shared[index] = (raw, records.encode(msgspec.structs.replace(args,
                                                                             values=values)))
        for name, swaps in ((key, outcomes), (items_key(key), items), (job_key(key), shared)):
            if swaps:
                elements[name] = swaps
    return elements


async def _reseal_one(storage: Storage, codec: EncryptionCodec, run_id: str,
                      progress: Progress) -> None:
    """Re-seal one run's values (retried while the run rewrites them under the rotation)."""
    for _ in range(ATTEMPTS):
        stored = await storage.load_run(run_id, history=True, claims=True)
        if stored is None:
            return  # gone meanwhile (its retention ended)
        attempt = Progress()
        resealer = _Resealer(codec, run_id, attempt)
        try:
            reseal = run_reseal(stored, resealer.value, resealer.text)
            elements = await element_reseal(storage, run_id, list(stored.steps),
                                            resealer.value, resealer.text)
        except (msgspec.DecodeError, msgspec.ValidationError, CorruptRecord) as exc:
            progress.unreadable.append((run_id, f"a record cannot be read: {exc}"))
            return
        reseal = Reseal(reseal.head, reseal.steps, reseal.claims, elements, reseal.events)
        if reseal and not await storage.reseal_run(run_id, reseal):
            continue  # the run wrote a record since it was read: read it again
        progress.unreadable += attempt.unreadable
        if resealer.count:
            progress.runs_resealed += 1
            progress.values += resealer.count
        return
    progress.busy.append(run_id)


async def _rewrap(storage: Storage, codec: EncryptionCodec, subject: str) -> bool:
    """Re-wrap one subject's data key under the codec's current key; True if it was."""
    for _ in range(ATTEMPTS):
        wrapped = await storage.subject_key(subject)
        if wrapped is None or data_keys.wrapping_key(wrapped) == codec.current:
            return False  # erased meanwhile, or re-wrapped already
        key = data_keys.unwrap(codec, subject, wrapped, run_id=data_keys.data_key_id(subject))
        if key is None:
            raise ConfigurationError(
                f"keys rotate: a subject's data key (digest {subject[:16]}...) is wrapped under "
                f"key id {data_keys.wrapping_key(wrapped)!r}, which the configured codec does "
                "not hold: list that key in keys= until the rotation is done", option="codec")
        if await storage.replace_subject_key(subject, wrapped,
                                             data_keys.wrap(codec, subject, key)):
            return True
    return False


async def rotate(storage: Storage, codec: EncryptionCodec | None, to: str, *,
                 batch: int = BATCH, report: Report | None = None) -> Progress:
    """Re-seal every stored value under key `to` (see the module docstring).

    Args:
        storage: The storage whose runs are re-sealed.
        codec: The process's codec; it must seal with `to` already.
        to: The key id every value ends under.
        batch: Runs (and subjects) read per batch.
        report: Called with the progress after each batch.

    Raises:
        ConfigurationError: no codec, or one that does not seal with `to` yet, or a data key
            wrapped under a key it does not hold (nothing more is written).
        StorageError: the storage failed (run it again: it goes on where it stopped).
    """
    codec = check_target(codec, to)
    progress = Progress()
    async for digests in subject_pages(storage, batch):
        for subject in digests:
            progress.data_keys += await _rewrap(storage, codec, subject)
        if report is not None:
            report(progress)
    async for page in run_pages(storage, batch):
        for head in page.heads:
            progress.runs += 1
            await _reseal_one(storage, codec, head.run_id, progress)
        progress.unreadable += [(r, "its record cannot be read") for r in page.unreadable]
        if report is not None:
            report(progress)
    return progress


async def subject_pages(storage: Storage, batch: int) -> AsyncIterator[list[str]]:
    """The digests of every subject with a data key, a page at a time (none empty)."""
    cursor = ""
    while True:
        digests, cursor = await storage.subject_digests(cursor, batch)
        if digests:
            yield digests
        if not cursor:
            return


async def run_pages(storage: Storage, batch: int) -> AsyncIterator[RunPageData]:
    """Every reactor's runs, newest first, a page of `batch` at a time."""
    cursor: str | None = None
    while True:
        page = await storage.list_runs(None, None, batch, cursor)
        yield page
        cursor = page.next_cursor
        if cursor is None:
            return


@dataclass(slots=True)
class KeyCount:
    """What `keys check` found: values per key id.

    Attributes:
        values: Key id -> how many stored values are sealed under it (`"clear"`: stored
            without a codec; `"subject data keys"`: under subjects' own data keys).
        data_keys: Codec key id -> how many subjects' data keys it wraps.
        runs: Runs read.
        unreadable: Runs whose records cannot be read (`(run id, why)`).
    """

    values: Counter[str] = field(default_factory=Counter)
    data_keys: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)


CLEAR = "clear"
NIL_BYTES = bytes(records.NIL)
"""How a Raw field that holds no value (yet) is stored: never counted as a clear value."""
SUBJECT_KEYS = "subject data keys"


async def check(storage: Storage, *, batch: int = BATCH,
                report: Callable[[KeyCount], None] | None = None) -> KeyCount:
    """Count the stored values per key id, and subjects' data keys per wrapping key id (reads
    only; no key is needed).

    Args:
        storage: The storage to read.
        batch: Runs (and subjects) read per batch.
        report: Called with the count after each batch.

    Raises:
        StorageError: the storage failed.
    """
    found = KeyCount()

    def count(data: bytes | str) -> None:
        key_id = envelope.key_id_of(data)
        found.values[CLEAR if key_id is None else
                     SUBJECT_KEYS if key_id.startswith(DATA_KEY_PREFIX) else key_id] += 1

    def value(_: str, data: bytes) -> bytes:
        if data != NIL_BYTES:  # an absent value's placeholder (a pending step's result): none
            count(data)
        return data

    def text(data: str) -> str:
        if data:
            count(data)
        return data

    async for digests in subject_pages(storage, batch):
        for subject in digests:
            wrapped = await storage.subject_key(subject)
            if wrapped is not None:
                found.data_keys[data_keys.wrapping_key(wrapped) or CLEAR] += 1
    async for page in run_pages(storage, batch):
        for head in page.heads:
            stored = await storage.load_run(head.run_id, history=True, claims=True)
            if stored is None:
                continue
            found.runs += 1
            try:
                run_reseal(stored, value, text)
                await element_reseal(storage, head.run_id, list(stored.steps), value, text)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                found.unreadable.append((head.run_id, f"a record cannot be read: {exc}"))
        found.unreadable += [(r, "its record cannot be read") for r in page.unreadable]
        if report is not None:
            report(found)
    return found
