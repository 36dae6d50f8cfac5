"""History trimmed at `history_limit`: the snapshot a call returns holds exactly the events
storage kept, even when concurrent checkpoints reached storage in another order than the
execution saw their replies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import configured, redis_namespace, unique

LIMIT = 5


@pytest.fixture(params=["memory", "redis"])
async def short_history(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    backend: rf.Storage
    if request.param == "memory":
        backend = rf.MemoryStorage(history_limit=LIMIT)
    else:
        backend = RedisStorage.from_url(request.getfixturevalue("redis_url"),
                                        namespace=redis_namespace(), history_limit=LIMIT)
    async with configured(backend):
        yield backend


async def test_trimmed_history_is_the_same_returned_and_read_back(
        short_history: rf.Storage) -> None:
    storage = short_history
    flow = rf.Reactor(unique("trimmed"))
    a_written, b_returned = anyio.Event(), anyio.Event()

    @flow.step
    async def a() -> int:
        return 1

    @flow.step
    async def b() -> int:
        await a_written.wait()  # b checkpoints after a...
        return 2

    @flow.step
    async def c(a: int, b: int) -> int:
        return a + b

    real = storage.save_step

    async def slow_reply(run_id: str, owner: str, key: str, record: bytes,
                         events: Sequence[bytes] = (), *, unit: bool = False) -> bytes | None:
        """...but a's reply reaches its step only after b's did (a slow connection)."""
        control = await real(run_id, owner, key, record, events, unit=unit)
        if key == "a":
            a_written.set()
            with anyio.fail_after(10):
                await b_returned.wait()
        elif key == "b":
            b_returned.set()
        return control

    storage.save_step = slow_reply  # type: ignore[method-assign]
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED and run.value == 3
    stored = await flow.get(run.id)
    assert len(stored.history) == LIMIT
    assert run.history == stored.history
    assert run == stored
