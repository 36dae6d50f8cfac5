"""The reads behind `reactorflow versions`, `deploy-check` and `runs migrate`
(`reactorflow.runtime.ops.inventory`), on both backends: the three verdicts with nothing
written (every record compared before and after), the in-flight counts per stored version with
the stranded ones marked, and a bulk migration with a refusal among successes, run twice."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import reactorflow as rf
from reactorflow.definition import naming
from reactorflow.errors import MigrationError
from reactorflow.runtime.ops import inventory
from tests.versions.storage_image import image
from tests.workflows import versions_v1 as v1
from tests.workflows import versions_v2 as v2

CHECKOUT, RETIRED = v1.checkout.name, v1.retired.name


@contextmanager
def undeclared(*reactors: rf.Reactor) -> Iterator[None]:
    """This process without `reactors`, as one deployed without their module."""
    for reactor in reactors:
        naming.forget(reactor)
    try:
        yield
    finally:
        for reactor in reactors:
            naming.register(reactor)


async def stored_runs() -> dict[str, str]:
    """In-flight runs of each kind (and an ended one), by what a deploy of v2 does with them."""
    with undeclared(v2.checkout):  # stored by version 1's code
        at_approve = await v1.checkout.run(item="tea")
        at_review = await v1.checkout.run(item="gin")
        await v1.checkout.continue_(at_review.id, step="approve", payload={"ok": True})
        retired = await v1.retired.run()
        ended = await v1.checkout.run(item="rum")
        await v1.checkout.cancel(ended.id)
    current = await v2.checkout.run(item="tea")
    assert (at_approve.version, current.version) == (1, 2)
    return {"migrates": at_approve.id, "review": at_review.id, "retired": retired.id,
            "continues": current.id, "ended": ended.id}


def _url(storage: rf.Storage, request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("redis_url") if isinstance(storage, rf.RedisStorage) else None


async def test_deploy_check_says_continues_migrates_stranded_and_writes_nothing(
        storage: rf.Storage, request: pytest.FixtureRequest) -> None:
    runs = await stored_runs()
    url = _url(storage, request)
    before = await image(storage, url)
    seen: list[int] = []

    with undeclared(v1.checkout, v1.retired):  # the deploy: only version 2's module
        verdicts = {v.run_id: v for v in await inventory.deploy_check(seen.append)}

    assert await image(storage, url) == before
    assert runs["ended"] not in verdicts
    mine = {name: verdicts[run_id] for name, run_id in runs.items() if name != "ended"}
    assert {name: v.verdict for name, v in mine.items()} == {
        "migrates": "migrates", "review": "stranded", "retired": "stranded",
        "continues": "continues"}
    assert mine["continues"].differences == mine["migrates"].differences == []
    assert (mine["review"].reactor, mine["review"].version) == (CHECKOUT, 1)
    assert any("waits on interrupt 'review'" in d for d in mine["review"].differences)
    assert mine["retired"].differences == [
        f"reactor {RETIRED!r} is declared by none of the modules loaded: keep the module that "
        "declares it, or let its runs finish first"]
    assert seen and seen[-1] == len(verdicts)


async def test_deploy_check_of_a_version_no_migration_leaves_says_so(
        storage: rf.Storage) -> None:
    runs = await stored_runs()
    with undeclared(v1.checkout, v2.checkout), undeclared(v1.retired):
        verdicts = {v.run_id: v for v in await inventory.deploy_check()}
    assert verdicts[runs["continues"]].verdict == "stranded"
    with undeclared(v2.checkout):  # version 1 alone: its runs continue, v2's has no path down
        again = {v.run_id: v for v in await inventory.deploy_check()}
    assert again[runs["migrates"]].verdict == again[runs["review"]].verdict == "continues"
    assert again[runs["continues"]].differences == [
        "version 2 is not declared (declared: 1) and no migration leads from it"]


async def test_versions_counts_in_flight_runs_per_version_and_marks_the_stranded(
        storage: rf.Storage) -> None:
    await stored_runs()

    both = {r.reactor: r for r in (await inventory.versions()).reactors}
    with undeclared(v1.checkout, v1.retired):
        deployed = {r.reactor: r for r in (await inventory.versions()).reactors}

    assert both[CHECKOUT].declared == [1, 2]
    assert [(v.version, v.in_flight, v.stranded) for v in both[CHECKOUT].versions] == [
        (1, 2, False), (2, 1, False)]
    assert [(v.version, v.in_flight, v.stranded) for v in both[RETIRED].versions] == [
        (1, 1, False)]
    assert deployed[CHECKOUT].declared == [2]
    assert [(v.version, v.in_flight, v.stranded, v.migrates_to)
            for v in deployed[CHECKOUT].versions] == [(1, 2, True, 2), (2, 1, False, None)]
    assert deployed[RETIRED].declared == []
    assert [(v.version, v.in_flight, v.stranded) for v in deployed[RETIRED].versions] == [
        (1, 1, True)]
    assert deployed[CHECKOUT].stranded == 2


async def test_migrate_runs_reports_a_refusal_among_successes_and_again_is_safe(
        storage: rf.Storage, request: pytest.FixtureRequest) -> None:
    runs = await stored_runs()
    url = _url(storage, request)
    with undeclared(v1.checkout, v1.retired):
        heads = await inventory.on_version(CHECKOUT, 1)
        assert sorted(h.run_id for h in heads) == sorted([runs["migrates"], runs["review"]])
        before = await image(storage, url)
        dry = {v.run_id: v for v in await inventory.classify(heads, inventory.would_migrate)}
        assert await image(storage, url) == before  # the dry run wrote nothing
        assert dry[runs["migrates"]].verdict == "migrates"
        assert dry[runs["review"]].verdict == "stranded"
        assert any("'review'" in d for d in dry[runs["review"]].differences)

        first: list[inventory.Outcome] = []
        await inventory.migrate_runs(v2.checkout, [h.run_id for h in heads], first.append)
        again: list[inventory.Outcome] = []
        await inventory.migrate_runs(v2.checkout, [h.run_id for h in heads], again.append)
        left = await inventory.on_version(CHECKOUT, 1)

    outcomes = {o.run_id: o for o in first}
    assert (outcomes[runs["migrates"]].version, outcomes[runs["migrates"]].error) == (2, None)
    assert not outcomes[runs["migrates"]].already
    refused = outcomes[runs["review"]].error
    assert isinstance(refused, MigrationError) and refused.run_id == runs["review"]
    assert (await v2.checkout.get(runs["migrates"])).version == 2
    assert [h.run_id for h in left] == [runs["review"]]  # the refused run is as it was
    repeated = {o.run_id: o for o in again}
    assert repeated[runs["migrates"]].already and repeated[runs["migrates"]].version == 2
    assert isinstance(repeated[runs["review"]].error, MigrationError)
