"""Every field of a stored record that fails to decode is `rf.CorruptRecord` for that run only,
never a bare `ValueError` (issue 22, item 9), and one run key of the wrong Redis type leaves
listing working for every other run: the page lists them and names the unreadable one
(item 8). A table over the fields of the run record, its step records and its element slots,
on each backend that can hold the corrupt value (memory keeps typed numbers, so only its bytes
and text can be damaged)."""

from __future__ import annotations

import httpx
import msgspec
import pytest

import reactorflow as rf
from reactorflow.runtime.ops import lookup
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.web import create_app
from tests.helpers import unique

GARBAGE = b"\xc1 not msgpack"  # 0xc1 is never valid MessagePack

flow = rf.Reactor(unique("corrupt-field"))


@flow.step
async def first() -> list[int]:
    return [1, 2]


@flow.map_step(over="first")
async def double(item: int) -> int:
    return 2 * item


@flow.interrupt
async def gate(payload: str, double: list[int]) -> str:
    return payload


# field -> the value written in its place (bytes) ; "redis" fields exist only as Redis text
RUN_FIELDS = {"created": b"soon", "touched": b"soon", "meta": GARBAGE, "state": GARBAGE,
              "status": b"sleeping"}
REDIS_ONLY = {"created", "touched"}
STEP_RECORDS = {"first": GARBAGE, "first ": msgspec.msgpack.encode(["no-such-status", 1])}
ELEMENT_SLOTS = {"double": GARBAGE}
TABLE = ([("run", name) for name in RUN_FIELDS] + [("step", name) for name in STEP_RECORDS]
         + [("element", name) for name in ELEMENT_SLOTS])


async def _damage(storage: rf.Storage, run_id: str, record: str, name: str) -> None:
    """Overwrite one field below the storage contract, as a stray write or a bit flip would."""
    if isinstance(storage, MemoryStorage):
        run = storage._runs[run_id]
        if record == "run":
            value = RUN_FIELDS[name]
            setattr(run, name, value.decode() if name == "status" else value)
        elif record == "step":
            run.steps[name.strip()] = STEP_RECORDS[name]
        else:
            await storage.save_elements(run_id, name, {0: ELEMENT_SLOTS[name]}, replace=True)
        return
    assert isinstance(storage, RedisStorage)
    client = (await storage._redis.get()).client
    if record == "run":
        await client.hset(storage._keys.run(run_id), name, RUN_FIELDS[name])
    elif record == "step":
        await client.hset(storage._keys.steps(run_id), name.strip(), STEP_RECORDS[name])
    else:
        await client.hset(storage._keys.elements(run_id, name), "0", ELEMENT_SLOTS[name])


@pytest.mark.parametrize(("record", "name"), TABLE, ids=[f"{r}-{n.strip()}" for r, n in TABLE])
async def test_a_field_that_fails_to_decode_is_corrupt_record_for_that_run(
        storage: rf.Storage, record: str, name: str) -> None:
    if isinstance(storage, MemoryStorage) and record == "run" and name in REDIS_ONLY:
        pytest.skip("memory keeps its numbers typed: they cannot be damaged")
    bad = await flow.run()
    healthy = await flow.run()
    assert bad.status is healthy.status is rf.Status.PAUSED
    await _damage(storage, bad.id, record, name)

    with pytest.raises(rf.CorruptRecord) as caught:
        await lookup.get_run(bad.id)  # (a run's meta and element slots: read by continue_)
        run = await flow.continue_(bad.id, step="gate", payload="ok")
        raise AssertionError(f"read as {run}")
    error = caught.value
    assert isinstance(error, rf.StorageError) and error.run_id == bad.id
    assert bad.id in str(error) and "other runs are not affected" in str(error)
    if record == "run" and name in REDIS_ONLY:
        assert error.field == name and f"its {name} in " in str(error)
    assert (await lookup.get_run(healthy.id)).status is rf.Status.PAUSED  # only that run
    done = await flow.continue_(healthy.id, step="gate", payload="ok")
    assert done.status is rf.Status.COMPLETED


async def _wrong_type(storage: RedisStorage, run_id: str) -> str:
    """The run's key replaced by a string (its index entries kept)."""
    client = (await storage._redis.get()).client
    key = storage._keys.run(run_id)
    await client.delete(key)
    await client.set(key, "not a hash")
    return key


async def test_a_run_key_of_the_wrong_type_is_left_out_of_listing_and_named(
        storage: rf.Storage) -> None:
    if not isinstance(storage, RedisStorage):
        pytest.skip("memory holds no keys of another type")
    older, bad, newer = (await flow.run(), await flow.run(), await flow.run())
    key = await _wrong_type(storage, bad.id)

    for page in (await rf.list_runs(), await flow.list_runs(),
                 await rf.list_runs(status=rf.Status.PAUSED)):
        assert [s.id for s in page.runs] == [newer.id, older.id]
        assert page.unreadable == [bad.id]
    with pytest.raises(rf.CorruptRecord) as caught:
        await lookup.get_run(bad.id)
    assert caught.value.key == key and key in str(caught.value)
    with pytest.raises(rf.CorruptRecord):
        await flow.get(bad.id)

    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        body = (await http.get("/api/runs")).json()
    assert [r["id"] for r in body["runs"]] == [newer.id, older.id]
    assert body["unreadable"] == [bad.id]


async def test_a_run_of_an_unknown_status_is_named_unreadable_in_listing(
        storage: rf.Storage) -> None:
    healthy, bad = await flow.run(), await flow.run()
    await _damage(storage, bad.id, "run", "status")
    page = await flow.list_runs()
    assert [s.id for s in page.runs] == [healthy.id] and page.unreadable == [bad.id]
