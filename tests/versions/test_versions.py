"""Versions (api.md §14), on both backends: new runs start on the newest version, a stored run
continues on its own, a version no module declares migrates along a declared path or is
refused naming the version, and a misfit migration writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.definition import naming
from tests.helpers import redeploy, unique


class Approval(msgspec.Struct):
    ok: bool


class Score(msgspec.Struct):
    value: float


def _v1(name: str, log: list[str]) -> rf.Reactor:
    """Version 1: reserve, then wait for approval, then bill."""
    flow = rf.Reactor(name, version=1)

    @flow.step
    async def reserve() -> str:
        log.append("v1 reserve")
        return "R1"

    @reserve.undo
    async def release(result: str) -> None:
        log.append(f"v1 release {result}")

    @flow.interrupt
    async def approve(reserve: str, payload: Approval) -> bool:
        return payload.ok

    @flow.step
    async def bill(approve: bool) -> str:
        log.append("v1 bill")
        return "billed"

    return flow


def _v2(name: str, log: list[str], *, migrate: Callable[[rf.Migration], Any] | None = None,
        source: int = 1) -> rf.Reactor:
    """Version 2: `bill` became `charge`, and a fraud check runs before approval."""
    flow = rf.Reactor(name, version=2)

    @flow.step
    async def reserve() -> str:
        log.append("v2 reserve")
        return "R2"

    @flow.step
    async def fraud_check(reserve: str) -> Score:
        log.append("v2 fraud_check")
        return Score(0.5)

    @flow.interrupt
    async def approve(fraud_check: Score, payload: Approval) -> bool:
        return payload.ok

    @flow.step
    async def charge(approve: bool) -> str:
        log.append("v2 charge")
        return "charged"

    if migrate is not None:
        flow.migrate(from_version=source)(migrate)
    return flow


async def _paused_v1(name: str, log: list[str]) -> tuple[rf.Reactor, str]:
    v1 = _v1(name, log)
    run = await v1.run()
    assert run.status is rf.Status.PAUSED and run.version == 1
    return v1, run.id


async def _stored(storage: rf.Storage, run_id: str) -> tuple[Any, ...]:
    stored = await storage.load_run(run_id, history=True, claims=True)
    assert stored is not None
    return (stored.head.meta, stored.head.state, stored.head.status, dict(stored.steps),
            list(stored.history or []))


def _fraud_done(run: rf.Migration) -> None:
    run.complete("fraud_check", result=Score(0.0))


async def test_new_runs_start_on_the_newest_version(storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1 = _v1(name, log)
    v2 = _v2(name, log)
    run = await v1.run()  # made on the old version's object: it starts on the newest
    assert run.version == 2 and log == ["v2 reserve", "v2 fraud_check"]
    assert (await v2.get(run.id)).version == 2
    assert (await v1.get(run.id)).version == 2


async def test_a_paused_v1_run_continued_after_v2_is_deployed_runs_v1s_steps(
        storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    _, run_id = await _paused_v1(name, log)
    v2 = _v2(name, log)  # deployed beside the old module, which stays loaded
    done = await v2.continue_(run_id, step="approve", payload={"ok": True})
    assert done.status is rf.Status.COMPLETED and done.version == 1
    assert log == ["v1 reserve", "v1 bill"]
    assert set(done.steps) == {"reserve", "approve", "bill"}
    fresh = await v2.run()
    assert fresh.version == 2


async def _is_paused(flow: rf.Reactor, run_id: str) -> bool:
    try:
        return (await flow.get(run_id)).status is rf.Status.PAUSED
    except rf.RunNotFound:  # not dispatched yet
        return False


async def test_an_async_child_of_a_v1_parent_reports_to_v1s_step_after_v2_is_deployed(
        storage: rf.Storage) -> None:
    """The child's end is reported through the parent's own version: version 2 renamed the
    step, so reading the newest version would find no step to report to."""
    child = rf.Reactor(unique("ver-child"))

    @child.interrupt
    async def approve(payload: Approval) -> bool:
        return payload.ok

    name = unique("ver-parent")
    v1 = rf.Reactor(name, version=1)

    @v1.async_reactor(child)
    async def ship() -> dict[str, Any]:
        return {}

    @v1.step
    async def confirm(ship: bool) -> str:
        return f"v1 confirmed {ship}"

    parent = await v1.dispatch()  # in the embedded worker: it parks while the child waits
    child_id = f"{parent.id}-ship"
    with anyio.fail_after(10):
        while not await _is_paused(child, child_id):
            await anyio.sleep(0.01)
    v2 = rf.Reactor(name, version=2)  # deployed beside version 1: `ship` became `send`

    @v2.async_reactor(child)
    async def send() -> dict[str, Any]:
        return {}

    @v2.step
    async def confirm2(send: bool) -> str:
        return "v2"

    await child.continue_(child_id, step="approve", payload={"ok": True})
    done = await v1.wait(parent.id, timeout=10)
    assert done.status is rf.Status.COMPLETED and done.version == 1
    assert done.value == "v1 confirmed True"


async def test_with_v1_removed_a_declared_migration_moves_the_run_onto_v2(
        storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1, run_id = await _paused_v1(name, log)
    redeploy(v1)  # the old module is gone

    def from_v1(run: rf.Migration) -> None:
        assert run.from_version == 1 and run.to_version == 2
        assert run.steps["reserve"].result == "R1"
        _fraud_done(run)

    v2 = _v2(name, log, migrate=from_v1)
    done = await v2.continue_(run_id, step="approve", payload={"ok": True})
    assert done.status is rf.Status.COMPLETED and done.version == 2
    assert log == ["v1 reserve", "v2 charge"]  # reserve kept, never re-run
    assert done.steps["fraud_check"].result == Score(0.0)
    migrated = [e for e in done.history if e.kind == rf.EventKind.RUN_MIGRATED]
    assert len(migrated) == 1 and "1 -> 2" in (migrated[0].detail or "")
    assert "completed fraud_check" in (migrated[0].detail or "")


async def test_with_no_migration_the_run_is_refused_naming_version_1(
        storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1, run_id = await _paused_v1(name, log)
    redeploy(v1)
    v2 = _v2(name, log)
    before = await _stored(storage, run_id)
    with pytest.raises(rf.DefinitionChanged) as info:
        await v2.continue_(run_id, step="approve", payload={"ok": True})
    assert info.value.version == 1 and info.value.run_id == run_id
    assert "version 1" in info.value.message and "migrate(from_version=1)" in info.value.message
    assert await _stored(storage, run_id) == before
    assert (await v2.get(run_id)).status is rf.Status.PAUSED


async def test_a_misfit_migration_is_refused_listing_every_misfit_and_writes_nothing(
        storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1, run_id = await _paused_v1(name, log)
    redeploy(v1)

    def careless(run: rf.Migration) -> None:
        run.rename("reserve", "reservation")  # no such step in v2; fraud_check never done

    v2 = _v2(name, log, migrate=careless)
    before = await _stored(storage, run_id)
    with pytest.raises(rf.MigrationError) as info:
        await v2.migrate(run_id)
    misfits = info.value.misfits
    assert any("'reservation'" in m and "not in version 2" in m for m in misfits)
    assert any("'approve' is waiting" in m and "'fraud_check'" in m for m in misfits)
    assert len(misfits) == 2, misfits
    assert info.value.from_version == 1 and info.value.to_version == 2
    assert await _stored(storage, run_id) == before


async def test_a_result_that_no_longer_decodes_is_a_misfit(storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1, run_id = await _paused_v1(name, log)
    redeploy(v1)
    v2 = rf.Reactor(name, version=2)

    @v2.step
    async def reserve() -> int:  # its result type changed: "R1" is no int
        return 7

    @v2.interrupt
    async def approve(reserve: int, payload: Approval) -> bool:
        return payload.ok

    @v2.migrate(from_version=1)
    def keep(run: rf.Migration) -> None:
        pass

    before = await _stored(storage, run_id)
    with pytest.raises(rf.MigrationError) as info:
        await v2.migrate(run_id)
    assert any("'reserve'" in m and "does not decode" in m for m in info.value.misfits)
    assert await _stored(storage, run_id) == before


async def test_a_hook_that_raises_names_the_hook_and_the_run(storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1, run_id = await _paused_v1(name, log)
    redeploy(v1)

    def broken(run: rf.Migration) -> None:
        raise KeyError("no such customer")

    v2 = _v2(name, log, migrate=broken)
    before = await _stored(storage, run_id)
    with pytest.raises(rf.MigrationError) as info:
        await v2.continue_(run_id, step="approve", payload={"ok": True})
    assert "broken" in info.value.message and run_id in info.value.message
    assert isinstance(info.value.cause, KeyError)
    assert await _stored(storage, run_id) == before


async def test_migrations_chain_and_drop_gives_up_undo(storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1, run_id = await _paused_v1(name, log)
    redeploy(v1)

    v2 = _v2(name, log, migrate=_fraud_done)
    v3 = rf.Reactor(name, version=3)  # reserve is gone: approval comes first

    @v3.step
    async def fraud_check() -> Score:
        return Score(1.0)

    @v3.interrupt
    async def approve(fraud_check: Score, payload: Approval) -> bool:
        return payload.ok

    @v3.step
    async def charge(approve: bool) -> str:
        log.append("v3 charge")
        return "charged"

    @v3.migrate(from_version=2)
    async def from_v2(run: rf.Migration) -> None:  # an async hook
        run.drop("reserve")

    redeploy(v2)  # only v3 is loaded now: the path 1 -> 2 -> 3 needs v2's hook too
    with pytest.raises(rf.DefinitionChanged):
        await v3.migrate(run_id)
    v2 = _v2(name, log, migrate=_fraud_done)
    moved = await v3.migrate(run_id)
    assert moved.version == 3 and moved.status is rf.Status.PAUSED
    detail = next(e.detail for e in moved.history if e.kind == rf.EventKind.RUN_MIGRATED) or ""
    assert "1 -> 2" in detail and "2 -> 3" in detail and "undo given up: reserve" in detail
    undone = await v3.undo(run_id)  # reserve's undo was given up: it never runs
    assert undone.status is rf.Status.CANCELLED
    assert "v1 release R1" not in log


async def test_migrate_ahead_of_time_and_its_refusals(storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1, run_id = await _paused_v1(name, log)
    v2 = _v2(name, log, migrate=_fraud_done)
    moved = await v2.migrate(run_id)  # v1 is still declared: migrating now is the caller's call
    assert moved.version == 2 and moved.status is rf.Status.PAUSED
    assert (await v2.migrate(run_id)).version == 2  # again: nothing to do
    done = await v1.continue_(run_id, step="approve", payload={"ok": True})
    assert done.version == 2 and log[-1] == "v2 charge"
    with pytest.raises(rf.RunNotFound):
        await v2.migrate("no-such-run")
    with pytest.raises(rf.RunStateError):
        await v2.migrate(run_id)  # completed: nothing left to migrate


async def test_same_version_with_an_incompatible_graph_says_bump_the_version(
        storage: rf.Storage) -> None:
    name, log = unique("ver"), []
    v1, run_id = await _paused_v1(name, log)
    redeploy(v1)
    changed = rf.Reactor(name, version=1)

    @changed.interrupt
    async def approve(payload: Approval) -> bool:  # no longer after reserve
        return payload.ok

    with pytest.raises(rf.DefinitionChanged) as info:
        await changed.continue_(run_id, step="approve", payload={"ok": True})
    assert "bump the version" in info.value.message and info.value.version == 1


def test_bad_versions_are_definition_errors() -> None:
    for bad in (0, -1, "2", 1.5, True):
        with pytest.raises(rf.DefinitionError) as info:
            rf.Reactor(unique("bad"), version=bad)  # type: ignore[arg-type]
        assert "version" in info.value.message
    flow = rf.Reactor(unique("bad"), version=2)
    for source in (2, 3, 0, "1"):
        with pytest.raises(rf.DefinitionError) as info:
            flow.migrate(from_version=source)  # type: ignore[arg-type]
        assert "from_version" in info.value.message
    with pytest.raises(rf.DefinitionError):
        flow.migrate()  # type: ignore[call-overload]


def test_one_name_and_version_declared_in_two_places_names_both() -> None:
    name = unique("twice")
    first = rf.Reactor(name, version=2)
    with pytest.raises(rf.DefinitionError) as info:
        rf.Reactor(name, version=2)
    assert "version 2" in info.value.message and info.value.message.count("test_versions.py") == 2
    third = rf.Reactor(name, version=3)  # another version of the name is no clash
    assert naming.versions(name) == [2, third.version]
    assert first.version == 2
