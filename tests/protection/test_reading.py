"""Reading protected runs (api.md §17): every value kind reads back whole with the key; keys
rotate (current seals, every listed key opens; a removed key leaves its values unreadable as
designed); values stored clear stay readable (one warning); a tampered byte or a ciphertext
moved from another run is `rf.CorruptRecord` for that run only, and `continue_`, `undo` and
`retry` that meet one write nothing; a reader without the key (no codec: the Python snapshot,
the HTTP API, the CLI in a subprocess) shows `"<encrypted>"`, and the engine refuses to run on
such a value, naming the run, the field and the key id."""

from __future__ import annotations

import json
import logging
import os

import anyio
import httpx
import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.protection import fields
from reactorflow.protection.envelope import key_id_of
from reactorflow.protection.keys import RunKeys
from reactorflow.runtime.ops.resume import check_continue
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.web import create_app
from tests.helpers import unique
from tests.operate.conftest import Shared, cli
from tests.protection.flows import CLEAR_MARKER, MARKER, Order, codec, everything, finished, order

paid = rf.Reactor(unique("paid"), inputs=Order)


@paid.step
async def charge(customer: str) -> dict[str, str]:
    return {"card": f"card of {customer}"}


@charge.undo
async def refund(result: dict[str, str]) -> None:
    return None


@paid.interrupt
async def confirm(payload: str, charge: dict[str, str]) -> str:
    return payload


async def _stored_step(storage: rf.Storage, run_id: str, key: str) -> bytes:
    stored = await storage.load_run(run_id)
    assert stored is not None
    return stored.steps[key]


async def _put_step(storage: rf.Storage, run_id: str, key: str, raw: bytes) -> None:
    """Overwrite one step record below the storage contract (a stray write, a bit flip)."""
    if isinstance(storage, MemoryStorage):
        storage._runs[run_id].steps[key] = raw
        return
    assert isinstance(storage, RedisStorage)
    client = (await storage._redis.get()).client
    await client.hset(storage._keys.steps(run_id), key, raw)


def _with_result(raw: bytes, result: bytes) -> bytes:
    return records.encode(msgspec.structs.replace(records.decode_step(raw),
                                                  result=msgspec.Raw(result)))


async def _everything_written(storage: rf.Storage, run_id: str) -> dict[str, object]:
    stored = await storage.load_run(run_id, history=True, claims=True)
    assert stored is not None
    return {"head": stored.head, "steps": stored.steps, "history": stored.history,
            "claims": stored.claims}


@pytest.mark.parametrize("fan_out", [True, False], ids=["fanned", "inline"])
async def test_every_value_kind_reads_back(storage: rf.Storage, with_codec: rf.EncryptionCodec,
                                           fan_out: bool) -> None:
    run = await finished(everything(fan_out=fan_out))
    got = await rf.get_run(run.id)
    assert got.status is rf.Status.COMPLETED, got.error
    assert got.inputs == order()
    assert got.steps["card"].result == {"token": f"tok-{MARKER}-customer"}
    assert got.steps["approve"].result.by == f"{MARKER}-ann"
    assert got.steps["address"].result == f"label for {MARKER}-customer at {MARKER}-street"
    assert got.steps["receipt"].result == f"receipt for {MARKER}-customer"
    assert got.value == f"3 shipped, receipt for {MARKER}-customer"
    stored = await storage.load_run(run.id)
    assert stored is not None
    assert key_id_of(records.decode_meta(stored.head.meta).inputs) == "k1"
    assert key_id_of(records.decode_step(stored.steps["card"]).result) == "k1"


async def test_rotation_new_current_old_key_still_opens_then_removed(storage: rf.Storage) -> None:
    raw_k1, raw_k2 = os.urandom(32), os.urandom(32)
    rf.configure(codec=rf.EncryptionCodec(keys={"k1": raw_k1}, current="k1"))
    old = await paid.run(order("old"))
    rf.configure(codec=rf.EncryptionCodec(keys={"k1": raw_k1, "k2": raw_k2}, current="k2"))
    new = await paid.run(order("new"))
    assert key_id_of(records.decode_step(await _stored_step(storage, old.id, "charge")).result
                     ) == "k1"
    assert key_id_of(records.decode_step(await _stored_step(storage, new.id, "charge")).result
                     ) == "k2"
    assert (await rf.get_run(old.id)).steps["charge"].result == {
        "card": f"card of {MARKER}-customerold"}
    done = await paid.continue_(old.id, step="confirm", payload=f"{MARKER} yes")
    assert done.status is rf.Status.COMPLETED  # k1's values opened, new ones sealed by k2
    assert key_id_of(records.decode_step(await _stored_step(storage, old.id, "confirm")).result
                     ) == "k2"
    rf.configure(codec=rf.EncryptionCodec(keys={"k2": raw_k2}, current="k2"))  # k1 retired
    try:
        gone = await rf.get_run(old.id)
        assert gone.inputs == "<encrypted>"  # sealed by k1
        assert gone.steps["charge"].result == "<encrypted>"
        assert gone.steps["confirm"].result == f"{MARKER} yes"  # sealed by k2
        before = await _everything_written(storage, new.id)
        assert (await rf.get_run(new.id)).steps["charge"].result == {
            "card": f"card of {MARKER}-customernew"}
        assert await _everything_written(storage, new.id) == before
    finally:
        rf.configure(codec=None)


async def test_values_stored_clear_stay_readable_with_one_warning(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    from reactorflow.protection import keys as keys_module

    clear = await paid.run(order("clear", CLEAR_MARKER))
    keys_module._warned = False  # (the warning is once per process)
    rf.configure(codec=codec("k1"))
    try:
        with caplog.at_level(logging.WARNING, logger="reactorflow.protection"):
            assert (await rf.get_run(clear.id)).inputs == order("clear", CLEAR_MARKER)
            await rf.get_run(clear.id)
            done = await paid.continue_(clear.id, step="confirm", payload="yes")
        assert done.status is rf.Status.COMPLETED
        warnings = [r for r in caplog.records if "clear_value" in r.getMessage()]
        assert len(warnings) == 1
        assert not any(r.levelno >= logging.ERROR for r in caplog.records)
        confirm_raw = records.decode_step(await _stored_step(storage, clear.id, "confirm"))
        assert key_id_of(confirm_raw.result) == "k1"  # new values are sealed
        assert key_id_of(records.decode_step(
            await _stored_step(storage, clear.id, "charge")).result) is None  # old stay clear
    finally:
        rf.configure(codec=None)


@pytest.mark.parametrize("damage", ["tampered", "transplanted"])
async def test_a_bad_ciphertext_is_corrupt_record_for_that_run_only(
        storage: rf.Storage, with_codec: rf.EncryptionCodec, damage: str) -> None:
    victim = await paid.run(order("victim"))
    other = await paid.run(order("other"))
    raw = await _stored_step(storage, victim.id, "charge")
    if damage == "tampered":
        sealed = bytearray(records.decode_step(raw).result)
        sealed[-3] ^= 0x01  # one bit of the tag
        bad = _with_result(raw, bytes(sealed))
    else:  # the other run's sealed result, a valid ciphertext of the same step
        bad = _with_result(raw, bytes(records.decode_step(
            await _stored_step(storage, other.id, "charge")).result))
    await _put_step(storage, victim.id, "charge", bad)
    with pytest.raises(rf.CorruptRecord) as caught:
        await rf.get_run(victim.id)
    assert caught.value.run_id == victim.id
    assert caught.value.field == "steps.charge.result"
    assert "fails authentication" in caught.value.message
    assert (await rf.get_run(other.id)).steps["charge"].result["card"].endswith("other")
    listed = await rf.list_runs(reactor=paid.name)
    assert {victim.id, other.id} <= {r.id for r in listed.runs}
    before = await _everything_written(storage, victim.id)
    with pytest.raises(rf.CorruptRecord):
        await paid.continue_(victim.id, step="confirm", payload="yes")
    with pytest.raises(rf.CorruptRecord):
        await paid.undo(victim.id)
    assert await _everything_written(storage, victim.id) == before  # nothing written
    done = await paid.continue_(other.id, step="confirm", payload="yes")
    assert done.status is rf.Status.COMPLETED


async def test_retry_of_a_run_with_bad_inputs_writes_nothing(
        storage: rf.Storage, with_codec: rf.EncryptionCodec) -> None:
    victim = await paid.run(order("victim"))
    other = await paid.run(order("other"))
    await paid.cancel(victim.id)
    head = (await storage.load_run(victim.id))
    donor = (await storage.load_run(other.id))
    assert head is not None and donor is not None
    meta = msgspec.structs.replace(records.decode_meta(head.head.meta),
                                   inputs=records.decode_meta(donor.head.meta).inputs)
    if isinstance(storage, MemoryStorage):
        storage._runs[victim.id].meta = records.encode(meta)
    else:
        assert isinstance(storage, RedisStorage)
        client = (await storage._redis.get()).client
        await client.hset(storage._keys.run(victim.id), "meta", records.encode(meta))
    runs_before = {r.id for r in (await rf.list_runs(reactor=paid.name)).runs}
    with pytest.raises(rf.CorruptRecord) as caught:
        await paid.retry(victim.id)
    assert caught.value.field == "inputs"
    assert {r.id for r in (await rf.list_runs(reactor=paid.name)).runs} == runs_before


async def test_a_process_without_the_key_shows_encrypted_and_refuses_to_run(
        storage: rf.Storage) -> None:
    rf.configure(codec=codec("k1"))
    failing = everything(fail_late=True, fan_out=False)
    failed = await finished(failing, "f")
    assert failed.status is rf.Status.FAILED
    paused = await paid.run(order("p"))
    rf.configure(codec=None)  # a keyless process
    got = await rf.get_run(failed.id)
    assert got.inputs == "<encrypted>"
    assert got.steps["card"].result == "<encrypted>"
    assert got.error is not None and got.error.message == "<encrypted>"
    assert got.error.type == "LookupError"  # structure stays clear
    assert got.error.step == "finish"
    assert all(MARKER not in e.detail for e in got.history)
    assert "<encrypted>" in [e.detail for e in got.history]
    summaries = (await rf.list_runs(reactor=failing.name)).runs
    assert [s.error.message for s in summaries if s.error is not None] == ["<encrypted>"]
    with pytest.raises(rf.KeyUnavailable) as caught:
        await paid.undo(paused.id)
    assert caught.value.run_id == paused.id
    assert caught.value.key_id == "k1"
    assert caught.value.field == "inputs"
    assert "k1" in caught.value.message and paused.id in caught.value.message
    assert (await rf.get_run(paused.id)).status is rf.Status.PAUSED


async def test_the_http_api_and_the_cli_without_a_key_show_encrypted(shared: Shared) -> None:
    rf.configure(codec=codec("k1"))
    run = await finished(everything(fail_late=True, fan_out=False), "api")
    assert run.status is rf.Status.FAILED
    rf.configure(codec=None)
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        response = await http.get(f"/api/runs/{run.id}")
        assert response.status_code == 200, response.text
        body = response.text
        listing = await http.get("/api/runs")
        assert listing.status_code == 200, listing.text
    assert MARKER not in body and "<encrypted>" in body
    assert MARKER not in listing.text and "<encrypted>" in listing.text
    shown = cli(shared, "runs", "show", run.id, "--json")  # no codec, no app: a keyless tool
    assert shown.code == 0, shown.err
    assert MARKER not in shown.out and "<encrypted>" in shown.out
    json.loads(shown.out)
    text = cli(shared, "runs", "show", run.id)
    assert text.code == 0, text.err
    assert MARKER not in text.out and "<encrypted>" in text.out


async def test_a_keyless_continue_writes_nothing_and_a_key_holder_continues(
        storage: rf.Storage) -> None:
    """A process holding no codec never stores a payload in clear for a run whose values are
    sealed: `KeyUnavailable` naming the run, its inputs and the key id, and nothing written (no
    claim, no attempt, no event, no lock); a process holding the key then continues the run."""
    made = codec("k1")
    rf.configure(codec=made)
    run = await paid.run(order("late"))
    rf.configure(codec=None)
    before = await _everything_written(storage, run.id)
    with pytest.raises(rf.KeyUnavailable):  # (its check says so too: the API's, the CLI's)
        await check_continue(paid, run.id, step="confirm", payload="checked first")
    with pytest.raises(rf.KeyUnavailable) as caught:
        await paid.continue_(run.id, step="confirm", payload=f"from a keyless tool {MARKER}")
    assert (caught.value.run_id, caught.value.field, caught.value.key_id) == (
        run.id, "inputs", "k1")
    assert await _everything_written(storage, run.id) == before
    assert await storage.lock_owner(run.id) is None
    with pytest.raises(rf.KeyUnavailable):  # (the payload is checked first: a bad one too)
        await paid.continue_(run.id, step="confirm", payload=3)
    assert await _everything_written(storage, run.id) == before
    rf.configure(codec=made)
    done = await paid.continue_(run.id, step="confirm", payload="from a keyed tool")
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == "from a keyed tool"


stepwise = rf.Reactor(unique("stepwise"), inputs=Order)


@stepwise.interrupt
async def first(payload: str, customer: str) -> str:
    return f"{payload} for {customer}"


@stepwise.interrupt
async def second(payload: str, first: str) -> str:
    return f"{first}, then {payload}"


async def test_a_keyless_continue_of_a_run_stored_clear_at_first_goes_on_with_the_key(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    """Mixed reading: a run started before the codec (its inputs clear) whose later values
    are sealed accepts a keyless process's payload, as its inputs show nothing sealed, but that
    process never drives it: `KeyUnavailable`, the lock given back; a process holding the key
    takes the run up (here the sweeper; a keyless sweeper leaves it, saying why) and applies
    the payload."""
    run = await stepwise.run(order("mixed"))  # no codec yet: its inputs are clear
    made = codec("k1")
    rf.configure(codec=made)
    paused = await stepwise.continue_(run.id, step="first", payload="sealed")
    assert paused.waiting_on == ["second"]
    rf.configure(codec=None)
    with pytest.raises(rf.KeyUnavailable) as caught:
        await stepwise.continue_(run.id, step="second", payload="from a keyless tool")
    assert caught.value.field == "steps.first.result"
    assert await storage.lock_owner(run.id) is None  # given back
    rf.configure(stall_timeout=0.05)
    await anyio.sleep(0.1)
    with caplog.at_level(logging.WARNING, logger="reactorflow"):
        keyless = await rf.sweep_once()  # a keyless sweeper leaves it, saying why
    assert keyless.no_key == [run.id] and keyless.recovered == []
    [said] = [r for r in caplog.records if "sweep.key_unavailable" in r.getMessage()]
    assert "key_id=k1" in said.getMessage() and said.exc_info is None  # one line, no traceback
    assert (await rf.get_run(run.id)).status is rf.Status.RUNNING
    rf.configure(codec=made)
    assert (await rf.sweep_once()).recovered == [run.id]
    done = await stepwise.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == f"sealed for {order('mixed').customer}, then from a keyless tool"


mapped = rf.Reactor(unique("mapped"), inputs=Order)


@mapped.map_step(over="items", fan_out=False)
async def shout(item: str) -> str:
    return item.upper()


@mapped.interrupt
async def go(payload: str, shout: list[str]) -> str:
    return payload


@mapped.step
async def joined(shout: list[str], go: str) -> str:
    return f"{go}: {' '.join(shout)}"


async def _seal_element(storage: rf.Storage, run_id: str, made: rf.EncryptionCodec) -> None:
    """Seal element 0's stored result of map `shout` in place, as a process holding `made`
    would have written it (a run whose elements a keyed worker ran)."""
    [raw] = await storage.load_elements(run_id, "shout", 0, 1)
    assert raw is not None
    record = records.decode_element(raw)
    sealed = RunKeys(run_id, made).seal(fields.element_result("shout", 0), record.result)
    await storage.save_elements(run_id, "shout", {0: records.encode(msgspec.structs.replace(
        record, result=msgspec.Raw(sealed)))}, replace=True)


async def test_a_drive_that_meets_a_value_it_cannot_open_never_ends_the_run(
        storage: rf.Storage) -> None:
    """A keyless process whose drive meets a sealed value midway (a map's element outcome,
    read only when a step needs it) stops without writing the run's end: `KeyUnavailable`, the
    run still running and its lock given back; a process holding the key goes on with it (it
    used to be stored `aborted`, a dead end that only `undo` could leave)."""
    made = codec("k1")
    run = await mapped.run(Order("c", ["a", "b"]))  # no codec: everything clear so far
    assert run.waiting_on == ["go"]
    await _seal_element(storage, run.id, made)
    with pytest.raises(rf.KeyUnavailable) as caught:
        await mapped.continue_(run.id, step="go", payload="loud")
    assert caught.value.field == "maps.shout.0.result" and caught.value.key_id == "k1"
    after = await rf.get_run(run.id)
    assert after.status is rf.Status.RUNNING
    assert rf.EventKind.RUN_ABORTED not in [e.kind for e in after.history]
    assert await storage.lock_owner(run.id) is None  # given back
    rf.configure(codec=made, stall_timeout=0.05)
    await anyio.sleep(0.1)
    await rf.sweep_once()
    done = await mapped.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == "loud: A B"
