"""`rf.Schedule`: a cron schedule that starts runs of its reactor (see docs/schedules.md).

Declaring only validates and records: the cron expression is parsed by `cronsim` and the
timezone resolved by `zoneinfo` at the `rf.Reactor(...)` call. Ticks follow the timezone's
calendar: the expression is evaluated on local wall-clock times, a wall time that does not
exist (a daylight-saving gap) is skipped, and one that happens twice (the repeated hour) fires
once, at its first occurrence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from reactorflow.errors import DefinitionError

MAX_CATCH_UP = 1000
"""The most missed ticks `catch_up="all"` starts runs for (the most recent ones)."""
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class CatchUp(StrEnum):
    """What happens to ticks missed while no scheduler ran."""

    LATEST = "latest"
    """One run for the most recent missed tick."""
    ALL = "all"
    """One run per missed tick (at most `MAX_CATCH_UP`)."""
    NONE = "none"
    """Missed ticks are skipped."""


class Schedule:
    """A cron schedule: each tick starts exactly one dispatched run of the reactor.

    Args:
        cron: A five-field cron expression (minute hour day-of-month month day-of-week).
        timezone: An IANA zone name (`zoneinfo`) whose calendar the expression follows.
        inputs: The run's inputs: a mapping of fields, an instance of the reactor's inputs
            type, or a callable receiving the tick (an aware `datetime`) and returning either;
            validated when the tick fires (invalid: logged and recorded on the schedule).
        catch_up: `"latest"`, `"all"` or `"none"` (see `CatchUp`).
        name: The schedule's name among its reactor's (default: its index in `schedules`).

    Raises:
        DefinitionError: A bad expression, timezone, catch-up policy or name; raised at the
            `rf.Reactor(...)` call, naming the field.
    """

    __slots__ = ("catch_up", "cron", "inputs", "name", "timezone", "zone")

    def __init__(self, cron: str, *, timezone: str = "UTC", inputs: Any = None,
                 catch_up: str = "latest", name: str | None = None) -> None:
        self.cron = cron
        self.timezone = timezone
        self.inputs = inputs
        self.catch_up: Any = catch_up
        self.name = name
        self.zone: ZoneInfo | None = None

    def __repr__(self) -> str:
        return (f"rf.Schedule({self.cron!r}, timezone={self.timezone!r}, "
                f"catch_up={getattr(self.catch_up, 'value', self.catch_up)!r}, "
                f"name={self.name!r})")

    def ticks(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """The ticks in (`after`, `until`], oldest first, as aware UTC datetimes.

        Args:
            after: The start of the window (excluded), an aware datetime.
            until: Its end (included), an aware datetime.
        """
        assert self.zone is not None
        local_after = after.astimezone(self.zone).replace(tzinfo=None)
        # one hour back: a tick in a repeated hour is found even from its second pass
        for wall in CronSim(self.cron, local_after - timedelta(hours=1)):
            tick = _instant(wall, self.zone)
            if tick is None or tick <= after:
                continue  # in a gap, or already past (the look-back hour)
            if tick > until:
                return
            yield tick

    def next_tick(self, after: datetime) -> datetime | None:
        """The first tick after `after` (aware UTC); None if none in the next ten years.

        Args:
            after: An aware datetime.
        """
        return next(self.ticks(after, after + timedelta(days=3660)), None)


def _instant(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """The UTC instant of local wall time `wall` (its first occurrence), or None in a gap."""
    aware = wall.replace(tzinfo=zone, fold=0)
    utc = aware.astimezone(UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != wall:
        return None  # the wall time does not exist: the clocks jumped over it
    return utc


def bind(schedules: Any, reactor: str) -> tuple[Schedule, ...]:
    """Validate a reactor's `schedules=` and return them (each resolved: zone, policy).

    Raises:
        DefinitionError: A bad entry, naming the reactor, the schedule and the field.
    """
    if isinstance(schedules, Schedule) or not isinstance(schedules, (list, tuple)):
        raise DefinitionError(f"reactor {reactor!r}: schedules={schedules!r} must be a list of "
                              "rf.Schedule", reactor=reactor)
    seen: set[str] = set()
    for index, schedule in enumerate(schedules):
        if not isinstance(schedule, Schedule):
            raise DefinitionError(f"reactor {reactor!r}: schedules[{index}]={schedule!r} is not "
                                  "an rf.Schedule", reactor=reactor)
        where = f"reactor {reactor!r}, schedules[{index}]"
        _check(schedule, where, reactor)
        label = schedule_label(schedule, index)
        if label in seen:
            raise DefinitionError(f"{where}: name={label!r} is used by another schedule of this "
                                  "reactor; give each its own name", reactor=reactor)
        seen.add(label)
    return tuple(schedules)


def _check(schedule: Schedule, where: str, reactor: str) -> None:
    if not isinstance(schedule.cron, str) or len(schedule.cron.split()) != 5:
        raise DefinitionError(f"{where}: cron={schedule.cron!r} must be a five-field cron "
                              "expression (minute hour day-of-month month day-of-week)",
                              reactor=reactor)
    try:
        CronSim(schedule.cron, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise DefinitionError(f"{where}: cron={schedule.cron!r} is invalid: {exc} (fields: "
                              "minute hour day-of-month month day-of-week)",
                              reactor=reactor) from None
    try:
        schedule.zone = ZoneInfo(schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise DefinitionError(f"{where}: timezone={schedule.timezone!r} is not a known IANA "
                              "timezone (e.g. 'UTC', 'Europe/Madrid')", reactor=reactor) from None
    try:
        schedule.catch_up = CatchUp(schedule.catch_up)
    except ValueError:
        raise DefinitionError(f"{where}: catch_up={schedule.catch_up!r} must be 'latest', "
                              "'all' or 'none'", reactor=reactor) from None
    name = schedule.name
    if name is not None and (not isinstance(name, str) or not name
                             or not set(name) <= NAME_CHARS or name.isdigit()):
        raise DefinitionError(f"{where}: name={name!r} must be letters, digits, '_', '-' or "
                              "'.' (and not only digits)", reactor=reactor)


def schedule_label(schedule: Schedule, index: int) -> str:
    """The schedule's name among its reactor's: `name`, else its index."""
    return schedule.name if schedule.name is not None else str(index)


def tick_inputs(schedule: Schedule, tick: datetime) -> Any:
    """The inputs for `tick`: the callable's result, or the declared value."""
    value = schedule.inputs
    if callable(value) and not isinstance(value, Mapping | type):
        produce: Callable[[datetime], Any] = value
        return produce(tick.astimezone(schedule.zone))
    return value
