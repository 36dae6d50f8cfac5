"""rf.Schedule declarations: errors naming the field, and ticks on the timezone's calendar
(daylight-saving gaps skip, repeated hours fire once) in Europe/Madrid."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import reactorflow as rf
from tests.schedules.conftest import Clock

MADRID = "Europe/Madrid"


def declare(*schedules: Any) -> rf.Reactor:
    return rf.Reactor(f"decl-{uuid.uuid4().hex[:8]}", schedules=list(schedules))


@pytest.mark.parametrize(("schedule", "field"), [
    (rf.Schedule("61 * * * *"), "cron='61 * * * *'"),
    (rf.Schedule("* * *"), "cron='* * *'"),
    (rf.Schedule("* * 31 2 mon-xyz"), "cron="),
    (rf.Schedule("0 2 * * *", timezone="Mars/Olympus"), "timezone='Mars/Olympus'"),
    (rf.Schedule("0 2 * * *", timezone="../etc/passwd"), "timezone="),
    (rf.Schedule("0 2 * * *", catch_up="some"), "catch_up='some'"),
    (rf.Schedule("0 2 * * *", name="a b"), "name='a b'"),
])
def test_a_bad_schedule_is_a_definition_error_naming_the_field(schedule: rf.Schedule,
                                                               field: str) -> None:
    with pytest.raises(rf.DefinitionError, match="schedules\\[0\\]") as info:
        declare(schedule)
    assert field in str(info.value)
    assert info.value.reactor is not None and info.value.reactor.startswith("decl-")


def test_two_schedules_of_one_reactor_need_distinct_names() -> None:
    with pytest.raises(rf.DefinitionError, match="name='x' is used by another"):
        declare(rf.Schedule("0 2 * * *", name="x"), rf.Schedule("0 3 * * *", name="x"))
    with pytest.raises(rf.DefinitionError, match=r"must be a list of rf\.Schedule"):
        rf.Reactor(f"decl-{uuid.uuid4().hex[:8]}", schedules=rf.Schedule("0 2 * * *"))
    with pytest.raises(rf.DefinitionError, match=r"is not an rf\.Schedule"):
        declare("0 2 * * *")


def local(ticks: list[datetime]) -> list[str]:
    return [t.astimezone(ZoneInfo(MADRID)).isoformat() for t in ticks]


def test_spring_forward_gap_skips_the_missing_time() -> None:
    flow = declare(rf.Schedule("30 2 * * *", timezone=MADRID))
    ticks = list(flow.schedules[0].ticks(datetime(2026, 3, 27, tzinfo=UTC),
                                         datetime(2026, 3, 31, tzinfo=UTC)))
    # 2026-03-29 02:30 does not exist in Madrid (02:00 -> 03:00): no tick that day
    assert local(ticks) == ["2026-03-27T02:30:00+01:00", "2026-03-28T02:30:00+01:00",
                            "2026-03-30T02:30:00+02:00"]


def test_fall_back_repeated_hour_fires_once() -> None:
    flow = declare(rf.Schedule("0,30 2 * * *", timezone=MADRID),
                   rf.Schedule("0 * * * *", timezone=MADRID))
    window = (datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 3, tzinfo=UTC))
    # 2026-10-25 03:00 CEST -> 02:00 CET: 02:00-02:59 happens twice, each tick fires once
    assert local(list(flow.schedules[0].ticks(*window))) == [
        "2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00"]
    assert local(list(flow.schedules[1].ticks(*window))) == [
        "2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00",
        "2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00"]
    # from inside the second pass of the repeated hour, the first pass's ticks are past
    second_pass = datetime(2026, 10, 25, 1, 15, tzinfo=UTC)  # 02:15 CET
    assert local(list(flow.schedules[0].ticks(second_pass, window[1]))) == []


@pytest.mark.parametrize(("start", "hours", "cron", "expected"), [
    (datetime(2026, 3, 28, 22, tzinfo=UTC), 30, "30 2 * * *",
     ["2026-03-30T02:30:00+02:00"]),  # never on the 29th
    (datetime(2026, 10, 24, 22, tzinfo=UTC), 20, "0,30 2 * * *",
     ["2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00"]),  # once each
])
async def test_schedule_once_across_a_transition(memory: rf.Storage, clock: Clock,
                                                 start: datetime, hours: int, cron: str,
                                                 expected: list[str]) -> None:
    flow = rf.Reactor(f"dst-{uuid.uuid4().hex[:8]}",
                      schedules=[rf.Schedule(cron, timezone=MADRID, catch_up="all")])

    @flow.step
    async def tick() -> str:
        return "ok"

    clock.at = start
    await rf.schedule_once(reactors=[flow])
    fired: list[rf.Run] = []
    for _ in range(hours * 6):  # a scheduler waking every 10 minutes
        clock.advance(minutes=10)
        fired += await rf.schedule_once(reactors=[flow])
    for run in fired:
        await flow.wait(run.id, timeout=30)
    keys = [f"schedule:{flow.name}:0:{tick}" for tick in expected]
    replays = [await flow.dispatch(idempotency_key=key) for key in keys]
    assert [r.id for r in replays] == [r.id for r in fired]  # each tick's run, by its key
    assert all(r.replayed for r in replays)
