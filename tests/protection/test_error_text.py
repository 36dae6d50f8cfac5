"""Error text read back inside the engine under a codec (api.md §17): a worker's sealed error
is opened for whoever reads it (an async unit's failure given as an `rf.Outcome`, or failing a
strict reader; a failed element of an atomic map failing its map), so the messages users get
are never an envelope, while storage holds only sealed text."""

from __future__ import annotations

import msgspec

import reactorflow as rf
from reactorflow.protection.envelope import TEXT_PREFIX
from tests.helpers import unique


class Order(msgspec.Struct):
    items: list[int]
    fail: bool = False


def _never_sealed(run: rf.Run) -> None:
    texts = [run.error.message if run.error else "", *(e.detail for e in run.history),
             *(s.error or "" for s in run.steps.values())]
    assert not [t for t in texts if TEXT_PREFIX in t], texts


async def test_a_unit_failure_reads_clear(storage: rf.Storage,
                                          with_codec: rf.EncryptionCodec) -> None:
    flow = rf.Reactor(unique("units"), inputs=Order)

    @flow.async_step
    async def fetch(items: list[int], fail: bool) -> list[int]:
        if fail:
            raise ConnectionError("catalogue down")
        return items

    @flow.step
    async def report(fetch: rf.Outcome[list[int]]) -> str:
        return "ok" if fetch.ok else f"failed: {fetch.error.message if fetch.error else ''}"

    @flow.step
    async def strict(fetch: list[int]) -> int:
        return len(fetch)

    run = await flow.wait((await flow.run(items=[1], fail=True)).id, timeout=30)
    assert run.status is rf.Status.FAILED
    assert run.steps["report"].result == "failed: catalogue down"
    assert run.error is not None and run.error.type == "AsyncUnitFailed"
    assert "catalogue down" in run.error.message
    _never_sealed(run)
    _never_sealed(await rf.get_run(run.id))


async def test_a_failed_element_fails_its_map_with_clear_text(
        storage: rf.Storage, with_codec: rf.EncryptionCodec) -> None:
    flow = rf.Reactor(unique("elements"), inputs=Order)

    @flow.map_step(over="items", fan_out=True)
    async def ship(item: int) -> int:
        if item == 2:
            raise ValueError(f"item {item} is broken")
        return item

    run = await flow.wait((await flow.run(items=[1, 2, 3])).id, timeout=30)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and "item 2 is broken" in run.error.message
    _never_sealed(await rf.get_run(run.id))
