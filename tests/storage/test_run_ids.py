"""Run ids as callers pass them: any text names a run or no run, the same on every backend, and
errors show long ids cut short."""

from __future__ import annotations

import socket

import pytest

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import unique


def _flow() -> rf.Reactor:
    flow = rf.Reactor(unique("ids"))

    @flow.step
    async def only() -> int:
        return 1

    return flow


@pytest.mark.parametrize("run_id", ["ab\udcffc", "\ud800", "x" * 10, "üñí\u2603"])
async def test_an_id_no_run_has_is_run_not_found_whatever_its_characters(
        storage: rf.Storage, run_id: str) -> None:
    flow = _flow()
    for call in (lambda: flow.get(run_id), lambda: flow.cancel(run_id),
                 lambda: flow.undo(run_id), lambda: flow.wait(run_id, timeout=0.1),
                 lambda: flow.continue_(run_id, step="gate", payload="x")):
        with pytest.raises(rf.RunNotFound) as caught:
            await call()
        assert caught.value.run_id == run_id


async def test_run_not_found_shows_a_long_id_cut_short(storage: rf.Storage) -> None:
    flow = _flow()
    huge = "r" * 1_000_000
    with pytest.raises(rf.RunNotFound) as caught:
        await flow.get(huge)
    assert caught.value.run_id == huge  # the field keeps it whole
    assert len(str(caught.value)) < 400
    assert "(1000000 characters)" in str(caught.value)


async def test_connection_errors_read_as_one_sentence_per_clause() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    backend = RedisStorage.from_url(f"redis://127.0.0.1:{port}/0", namespace="refused")
    try:
        with pytest.raises(rf.StorageConnectionError) as caught:
            await backend.load_head("any")
    finally:
        await backend.aclose()
    assert ".." not in str(caught.value)
    assert str(caught.value).endswith("Check that the server is running and the URL is right.")
