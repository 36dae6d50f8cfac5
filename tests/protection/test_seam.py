"""The seam a per-run data key plugs into (`protection.resolve.set_resolver`,
reactorflow/protection/SEAM.md): a resolver is asked once per run an execution creates (never per
value), its data key seals the run's values under a `~` key id that the codec's keys cannot open,
and a resolver that reports the key erased makes every such value read `"<erased>"` and the engine
refuse to run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.protection.codec import cipher
from reactorflow.protection.envelope import key_id_of
from reactorflow.protection.keys import DataKey, RunKeys
from reactorflow.protection.resolve import set_resolver
from reactorflow.records import RunMeta
from tests.helpers import unique
from tests.protection.flows import codec

chain = rf.Reactor(unique("seam"))


@chain.step
async def one() -> str:
    return "first value"


@chain.step
async def two(one: str) -> str:
    return one + ", second"


@chain.interrupt
async def wait(payload: str, two: str) -> str:
    return payload


class Subjects:
    """A stand-in subject layer: one data key for every run; `erased` destroys it."""

    def __init__(self) -> None:
        self.key = DataKey("~subject-1", cipher(os.urandom(32), "~subject-1"))
        self.erased = False
        self.calls: list[tuple[str, bool]] = []

    async def __call__(self, storage: rf.Storage, made: rf.EncryptionCodec | None,
                       meta: RunMeta | None, run_id: str) -> RunKeys:
        self.calls.append((run_id, meta is not None))
        if self.erased:
            return RunKeys(run_id, made, erased=True)
        return RunKeys(run_id, made, self.key)


@pytest.fixture
def subjects() -> Iterator[Subjects]:
    layer = Subjects()
    previous = set_resolver(layer)
    rf.configure(codec=codec("k1"))
    try:
        yield layer
    finally:
        set_resolver(previous)  # (the subjects layer's, installed at import)
        rf.configure(codec=None)


async def test_the_data_key_seals_and_is_resolved_once_per_execution(
        storage: rf.Storage, subjects: Subjects) -> None:
    run = await chain.run()
    assert run.status is rf.Status.PAUSED
    assert [r for r, _ in subjects.calls] == [run.id]  # one run of 2 steps: asked once
    stored = await storage.load_run(run.id)
    assert stored is not None
    assert key_id_of(records.decode_step(stored.steps["two"]).result) == "~subject-1"
    assert key_id_of(records.decode_meta(stored.head.meta).inputs) == "~subject-1"
    done = await chain.continue_(run.id, step="wait", payload="ok")
    assert done.steps["two"].result == "first value, second"
    assert done.value == "ok"
    set_resolver(None)  # a reader with the codec's keys only: the data key is not among them
    assert (await rf.get_run(run.id)).steps["two"].result == "<encrypted>"


async def test_an_erased_data_key_reads_erased_and_the_engine_refuses(
        storage: rf.Storage, subjects: Subjects) -> None:
    run = await chain.run()
    subjects.erased = True
    seen = await rf.get_run(run.id)
    assert seen.steps["one"].result == "<erased>"
    assert seen.inputs == "<erased>"
    with pytest.raises(rf.KeyUnavailable) as caught:
        await chain.undo(run.id)
    assert caught.value.erased and caught.value.key_id == "~subject-1"
    assert "erased" in caught.value.message
    assert (await rf.get_run(run.id)).status is rf.Status.PAUSED
