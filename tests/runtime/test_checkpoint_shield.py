"""A step checkpoint, once started, is waited for even when the caller is cancelled meanwhile
(`RunWriter.checkpoint` shields it), on both storage backends: a write still on its way when
the abort comes lands, and the aborted run shows the step completed. A write by an `@inline`
storage method needs no shield (it cannot suspend): see tests/architecture/test_inline.py."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

import reactorflow as rf
from tests.helpers import unique

pytestmark = pytest.mark.usefixtures("storage")


async def test_a_checkpoint_on_its_way_when_the_caller_is_cancelled_lands(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("shielded"))

    @flow.step
    async def only() -> int:
        return 1

    real = storage.save_step
    sending, sent = anyio.Event(), anyio.Event()
    written: list[str] = []

    async def slow_write(run_id: str, owner: str, key: str, record: bytes,
                         events: Sequence[bytes] = (), *, unit: bool = False) -> bytes | None:
        sending.set()
        await sent.wait()  # the write is on its way, not yet in storage
        control = await real(run_id, owner, key, record, events, unit=unit)
        written.append(key)
        return control

    storage.save_step = slow_write  # type: ignore[method-assign]
    scopes: list[anyio.CancelScope] = []

    async def caller() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await flow.run()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller)
            await sending.wait()
            scopes[0].cancel()  # the caller is cancelled: an abort
            await anyio.wait_all_tasks_blocked()  # (an unshielded write is cancelled here)
            assert written == []
            sent.set()
    assert written == ["only"]
    page = await flow.list_runs(status="aborted")
    assert len(page.runs) == 1
    run = await flow.get(page.runs[0].id)
    assert run.steps["only"].status is rf.StepStatus.COMPLETED
