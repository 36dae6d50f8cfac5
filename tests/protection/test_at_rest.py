"""With a codec configured, no user value reaches storage in clear (api.md §17): a marker put in
run inputs, step results, an interrupt's payload, a composed child's inputs, map items, shared
arguments and outcomes (a fanned-out map, an element reactor's), an async step's result, and
in error messages and tracebacks (a failed step, element and undo), is found nowhere in the
bytes storage holds: on Redis in any key of the server (scanned whole, every type read), in
memory in anything the storage object holds. The same runs read back whole in process."""

from __future__ import annotations

import pytest

import reactorflow as rf
from tests.helpers import unique
from tests.protection.conftest import memory_bytes, redis_bytes
from tests.protection.flows import MARKER, ChildIn, Order, everything, finished


def _stored(storage: rf.Storage, request: pytest.FixtureRequest) -> list[bytes]:
    if isinstance(storage, rf.MemoryStorage):
        return memory_bytes(storage)
    return redis_bytes(request.getfixturevalue("redis_url"))


async def test_no_marker_in_any_stored_byte(storage: rf.Storage, with_codec: rf.EncryptionCodec,
                                            request: pytest.FixtureRequest) -> None:
    flow = everything(fail_late=False)
    done = await finished(flow, "ok")
    assert done.status is rf.Status.COMPLETED, done.error
    failing = everything(fail_late=True)
    failed = await finished(failing, "bad")
    assert failed.status is rf.Status.FAILED
    # read back in process: every value whole
    assert done.inputs.customer == f"{MARKER}-customer" + "ok"
    assert done.steps["card"].result == {"token": f"tok-{MARKER}-customerok"}
    assert done.steps["approve"].result.comment == f"{MARKER}-street"
    assert done.steps["address"].result == f"label for {MARKER}-customerok at {MARKER}-street"
    assert done.steps["receipt"].result == f"receipt for {MARKER}-customerok"
    shipped = (await rf.get_run(done.id)).steps["finish"].result
    assert shipped.startswith("3 shipped")
    assert failed.error is not None and MARKER in failed.error.message
    assert MARKER in failed.error.traceback
    assert any(MARKER in f.message for f in failed.error.rollback_failures)
    assert any(MARKER in e.detail for e in failed.history)
    stored = _stored(storage, request)
    ids = [done.id.encode(), failed.id.encode()]
    assert all(any(i in b for b in stored) for i in ids)  # the scan saw both runs
    leaks = [b[:200] for b in stored if MARKER.encode() in b]
    assert leaks == []


async def test_without_a_codec_the_same_values_are_stored_clear(
        storage: rf.Storage, request: pytest.FixtureRequest) -> None:
    """The scan can fail: without a codec it finds the marker (a check of the check)."""
    done = await finished(everything(), "plain")
    assert done.status is rf.Status.COMPLETED, done.error
    assert any(MARKER.encode() in b for b in _stored(storage, request))


repaired = rf.Reactor(unique("repaired"), inputs=Order, on_failure="hold")
analytics = rf.Reactor(unique("analytics"), inputs=ChildIn)


@analytics.step
async def tally(address: str) -> str:
    return f"tallied {address}"


@repaired.step
async def quote(customer: str, note: str) -> str:
    return f"quote for {customer} ({note})"


@repaired.async_reactor(analytics)
async def track(customer: str) -> ChildIn:
    return ChildIn(f"{customer} tracked")


@repaired.step
async def book(quote: str, track: str) -> str:
    if "bad" in quote:
        raise ValueError(f"cannot book {quote}")
    return f"booked {quote} / {track}"


async def test_repairs_and_child_runs_store_no_marker(storage: rf.Storage,
                                                      with_codec: rf.EncryptionCodec,
                                                      request: pytest.FixtureRequest) -> None:
    """Values written by the repair operations (a skipped step's result, a rewind's new inputs,
    the steps run again) and by an async reactor's child run are sealed too."""
    held = await repaired.run(Order(f"{MARKER}-c", [], note="bad"))
    held = await repaired.wait(held.id, timeout=30)
    assert held.status is rf.Status.HELD, held.error
    done = await repaired.skip_step(held.id, "book", result=f"{MARKER} booked by hand")
    done = await repaired.wait(done.id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == f"{MARKER} booked by hand"
    again = await repaired.rewind(done.id, to="quote", inputs={"note": f"{MARKER}-good"})
    again = await repaired.wait(again.id, timeout=30)
    assert again.status is rf.Status.COMPLETED, again.error
    assert again.inputs.note == f"{MARKER}-good"
    assert again.value.startswith(f"booked quote for {MARKER}-c ({MARKER}-good)")
    assert again.value.endswith(f"tallied {MARKER}-c tracked")
    leaks = [b[:200] for b in _stored(storage, request) if MARKER.encode() in b]
    assert leaks == []
