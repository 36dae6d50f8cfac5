"""With a codec configured, no user value reaches storage in clear (api.md §17): a marker put in
run inputs, step results, an interrupt's payload, a composed child's inputs, map items, shared
arguments and outcomes (a fanned-out map, an element reactor's), an async step's result, and
in error messages and tracebacks (a failed step, element and undo), is found nowhere in the
bytes storage holds: on Redis in any key of the server (scanned whole, every type read), in
memory in anything the storage object holds. The same runs read back whole in process."""

from __future__ import annotations

import pytest

import reactorflow as rf
from tests.protection.conftest import memory_bytes, redis_bytes
from tests.protection.flows import MARKER, everything, finished


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
