"""Gate declarations: `rf.Lock`, `rf.Semaphore`, `rf.RateLimit`, `rf.Period`, `rf.OrderedLock`.

A gate is a small immutable value naming a shared thing by a key (a `str.format` template over
the reactor's inputs or the step's parameters, or a callable taking any subset of them by
keyword). Declaring one checks every option; binding it to a reactor or a step (`bind`) checks
that its key names only what is available there. Nothing here does I/O: acquisition is the
runtime's job (`reactorflow.runtime.gating`).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reactorflow.definition.gate_secrets import reads_secret
from reactorflow.definition.params import wire_subset
from reactorflow.errors import DefinitionError

Key = str | Callable[..., Any]


class GateKind(StrEnum):
    """What a gate is (the `gate` field of `rf.GateBusy`)."""

    LOCK = "lock"
    SEMAPHORE = "semaphore"
    RATE_LIMIT = "rate_limit"
    PERIOD = "period"
    ORDERED_LOCK = "ordered_lock"


WINDOWS = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}
"""Rate-limit window names and their lengths in seconds."""
CALENDAR = ("hour", "day", "week", "month")
"""The calendar buckets a `Period` accepts by name (UTC)."""


def _label(kind: GateKind, key: Key) -> str:
    shown = key if isinstance(key, str) else getattr(key, "__name__", repr(key))
    return f"rf.{_CLASS_NAMES[kind]}({shown!r})"


def _refuse(kind: GateKind, key: Key, option: str, value: Any, need: str) -> DefinitionError:
    return DefinitionError(f"{_label(kind, key)}: {option}={value!r} {need}")


def _seconds(kind: GateKind, key: Key, option: str, value: Any, *, zero: bool) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or value < 0 or (value == 0 and not zero)):
        need = "must be seconds >= 0" if zero else "must be seconds > 0"
        raise _refuse(kind, key, option, value, need)
    return float(value)


def _count(kind: GateKind, key: Key, option: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _refuse(kind, key, option, value, "must be a whole number >= 1")
    return value


def template_fields(template: str) -> list[tuple[str, str]]:
    """The replacement fields of a `str.format` template, each with the name it starts from
    (`"order.customer"` -> `("order.customer", "order")`), in order.

    Raises:
        ValueError: `template` is not a valid `str.format` template.
    """
    return [(field, re.split(r"[.\[]", field, maxsplit=1)[0])
            for _, field, _, _ in string.Formatter().parse(template) if field is not None]


def _check_key(kind: GateKind, key: Any) -> None:
    if isinstance(key, str):
        if not key:
            raise DefinitionError(f"rf.{_CLASS_NAMES[kind]}(''): the key must not be empty")
        try:
            list(string.Formatter().parse(key))
        except ValueError as exc:
            raise DefinitionError(f"{_label(kind, key)}: bad key template: {exc}") from exc
    elif not callable(key):
        raise DefinitionError(
            f"rf.{_CLASS_NAMES[kind]}({key!r}): the key must be a template string such as "
            "'account:{account_id}' or a callable returning one")


@dataclass(frozen=True, slots=True)
class Gate:
    """What every gate has: a key and how long a caller waits for it (seconds)."""

    key: Key
    wait: float

    @property
    def kind(self) -> GateKind:
        """What gate this is (`rf.GateBusy.gate`)."""
        raise NotImplementedError

    @property
    def exclusive(self) -> bool:
        """One holder at a time (what the deadlock guard looks at)."""
        return False

    @property
    def label(self) -> str:
        """The gate as messages name it: `rf.Lock('account:{account_id}')`."""
        return _label(self.kind, self.key)


@dataclass(frozen=True, slots=True, init=False)
class Lock(Gate):
    """At most one holder per key; re-entrant for its run.

    A step or composed child taking its run's lock proceeds. Renewed with the run's liveness lock
    while its holder lives; lapses `ttl` seconds after a crash. A reactor lock is held until the
    run's final state is saved (through its rollback), and let go while the run is paused. See
    [Gates](gates.md).

    Args:
        key: A `str.format` template over the reactor's inputs (a reactor gate) or the step's
            parameters (a step gate), or a callable taking any subset of them by keyword.
        ttl: Seconds the lock outlives a crashed holder.
        wait: Seconds a caller waits for the gate before `rf.GateBusy` (0: not at all).

    Raises:
        DefinitionError: A bad option (the message names the gate and the value), or a key that
            is empty, not a valid template, or neither a string nor a callable.
    """

    ttl: float

    def __init__(self, key: Key, *, ttl: float = 60, wait: float = 0) -> None:
        _check_key(GateKind.LOCK, key)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "ttl", _seconds(GateKind.LOCK, key, "ttl", ttl, zero=False))
        object.__setattr__(self, "wait", _seconds(GateKind.LOCK, key, "wait", wait, zero=True))

    @property
    def kind(self) -> GateKind:
        return GateKind.LOCK

    @property
    def exclusive(self) -> bool:
        return True


@dataclass(frozen=True, slots=True, init=False)
class Semaphore(Gate):
    """At most `limit` holders per key; not re-entrant. Otherwise like `rf.Lock`.

    Args:
        key: A `str.format` template over the reactor's inputs (a reactor gate) or the step's
            parameters (a step gate), or a callable taking any subset of them by keyword.
        limit: The most holders at once (>= 1).
        wait: Seconds a caller waits for the gate before `rf.GateBusy` (0: not at all).
        ttl: Seconds a place outlives a crashed holder.

    Raises:
        DefinitionError: A bad option (the message names the gate and the value), or a key that
            is empty, not a valid template, or neither a string nor a callable.
    """

    limit: int
    ttl: float

    def __init__(self, key: Key, *, limit: int, wait: float = 0, ttl: float = 60) -> None:
        kind = GateKind.SEMAPHORE
        _check_key(kind, key)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "limit", _count(kind, key, "limit", limit))
        object.__setattr__(self, "wait", _seconds(kind, key, "wait", wait, zero=True))
        object.__setattr__(self, "ttl", _seconds(kind, key, "ttl", ttl, zero=False))

    @property
    def kind(self) -> GateKind:
        return GateKind.SEMAPHORE

    @property
    def exclusive(self) -> bool:
        return self.limit == 1


@dataclass(frozen=True, slots=True, init=False)
class RateLimit(Gate):
    """Fixed windows (at least one), all checked and charged together.

    A refused call charges none. A run (or a step of a run) is charged once, never again on a
    resume, a redelivery or a retry.

    Args:
        key: A `str.format` template over the reactor's inputs (a reactor gate) or the step's
            parameters (a step gate), or a callable taking any subset of them by keyword.
        second: Calls allowed per second.
        minute: Calls allowed per minute.
        hour: Calls allowed per hour.
        day: Calls allowed per day.
        wait: Seconds a caller waits for the gate before `rf.GateBusy` (0: not at all).

    Raises:
        DefinitionError: No window, a bad option (the message names the gate and the value), or
            a bad key.
    """

    windows: tuple[tuple[str, int, int], ...]  # (name, seconds, limit), shortest first

    def __init__(self, key: Key, *, second: int | None = None, minute: int | None = None,
                 hour: int | None = None, day: int | None = None, wait: float = 0) -> None:
        kind = GateKind.RATE_LIMIT
        _check_key(kind, key)
        given = {"second": second, "minute": minute, "hour": hour, "day": day}
        windows = tuple((name, WINDOWS[name], _count(kind, key, name, value))
                        for name, value in given.items() if value is not None)
        if not windows:
            raise DefinitionError(f"{_label(kind, key)}: a rate limit needs at least one window "
                                  "(second=, minute=, hour= or day=)")
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "windows", windows)
        object.__setattr__(self, "wait", _seconds(kind, key, "wait", wait, zero=True))

    @property
    def kind(self) -> GateKind:
        return GateKind.RATE_LIMIT


@dataclass(frozen=True, slots=True, init=False)
class Period(Gate):
    """At most one successful run (or step) per key per period.

    Recorded when the run (step) completes. A later run in the same period ends `halted` with
    `halt_reason == "period"` without running a step; a later step is skipped.

    Args:
        key: A `str.format` template over the reactor's inputs (a reactor gate) or the step's
            parameters (a step gate), or a callable taking any subset of them by keyword.
        every: `"hour"`, `"day"`, `"week"`, `"month"` (calendar buckets in UTC) or seconds.

    Raises:
        DefinitionError: A bad option (the message names the gate and the value), or a key that
            is empty, not a valid template, or neither a string nor a callable.
    """

    every: str | float

    def __init__(self, key: Key, *, every: str | float) -> None:
        kind = GateKind.PERIOD
        _check_key(kind, key)
        if isinstance(every, str):
            if every not in CALENDAR:
                raise _refuse(kind, key, "every", every,
                              f"must be one of {', '.join(map(repr, CALENDAR))} or seconds > 0")
        else:
            every = _seconds(kind, key, "every", every, zero=False)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "every", every)
        object.__setattr__(self, "wait", 0.0)

    @property
    def kind(self) -> GateKind:
        return GateKind.PERIOD


@dataclass(frozen=True, slots=True, init=False)
class OrderedLock(Gate):
    """Runs with the same key execute one at a time, in the order they were started.

    A paused run keeps its turn, which passes on at its final state.

    Args:
        key: A `str.format` template over the reactor's inputs (a reactor gate) or the step's
            parameters (a step gate), or a callable taking any subset of them by keyword.
        poison_pill_timeout: Seconds a predecessor may hold the turn without progress before it
            is passed over.
        wait: Seconds a caller waits for the gate before `rf.GateBusy` (0: not at all).

    Raises:
        DefinitionError: A bad option (the message names the gate and the value), or a key that
            is empty, not a valid template, or neither a string nor a callable.
    """

    poison_pill_timeout: float

    def __init__(self, key: Key, *, poison_pill_timeout: float = 600, wait: float = 0) -> None:
        kind = GateKind.ORDERED_LOCK
        _check_key(kind, key)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "poison_pill_timeout", _seconds(
            kind, key, "poison_pill_timeout", poison_pill_timeout, zero=False))
        object.__setattr__(self, "wait", _seconds(kind, key, "wait", wait, zero=True))

    @property
    def kind(self) -> GateKind:
        return GateKind.ORDERED_LOCK


_CLASS_NAMES = {GateKind.LOCK: "Lock", GateKind.SEMAPHORE: "Semaphore",
                GateKind.RATE_LIMIT: "RateLimit", GateKind.PERIOD: "Period",
                GateKind.ORDERED_LOCK: "OrderedLock"}
_ORDER = {GateKind.ORDERED_LOCK: 0, GateKind.PERIOD: 1, GateKind.RATE_LIMIT: 2,
          GateKind.LOCK: 3, GateKind.SEMAPHORE: 4}
"""Reactor gates are taken in this order (ruby_reactor's): ordered lock, period, rate limit,
lock, semaphore. Two gates of one kind are taken in declaration order."""
_STEP_ORDER = {**_ORDER, GateKind.RATE_LIMIT: 5}
"""A step takes its rate limit last: a charge cannot be given back if a later gate is busy."""


@dataclass(frozen=True, slots=True)
class BoundGate:
    """A gate declared on a reactor or a step: what its key reads is checked."""

    gate: Gate
    names: tuple[str, ...]  # the parameters a callable key takes (empty for a template)
    index: int  # position among the gates of its declaration (tells two equal keys apart)

    @property
    def kind(self) -> GateKind:
        return self.gate.kind


def bind(gates: Any, *, where: str, available: Sequence[str], reactor: str,
         step: str | None = None, secrets: Mapping[str, Any] | None = None,
         ) -> tuple[BoundGate, ...]:
    """Check `gates=` of a reactor or a step; returns them in acquisition order.

    Args:
        secrets: the redaction mask of each name in `available` holding an `rf.Redacted`
            value (see `definition.gate_secrets`): a template may not format one.

    Raises:
        DefinitionError: not a sequence of gates; a template or callable naming something not
            in `available` (the message lists what is); a template formatting a redacted value
            (the message names the gate, the template and the field); two ordered locks.
    """
    if isinstance(gates, Gate):
        gates = [gates]
    if not isinstance(gates, list | tuple):
        raise DefinitionError(f"{where}: gates={gates!r} must be a list of rf.Lock, "
                              "rf.Semaphore, rf.RateLimit, rf.Period or rf.OrderedLock",
                              reactor=reactor, step=step)
    bound: list[BoundGate] = []
    for index, gate in enumerate(gates):
        if not isinstance(gate, Gate):
            raise DefinitionError(f"{where}: gates[{index}]={gate!r} is not a gate (rf.Lock, "
                                  "rf.Semaphore, rf.RateLimit, rf.Period, rf.OrderedLock)",
                                  reactor=reactor, step=step)
        names: tuple[str, ...] = ()
        if isinstance(gate.key, str):
            _check_template(gate, where, available, reactor, step, secrets or {})
        else:
            names = wire_subset(gate.key, what=f"{gate.label} key", reactor=reactor,
                                step=step or reactor, available=available)
        bound.append(BoundGate(gate, names, index))
    if sum(1 for b in bound if b.kind is GateKind.ORDERED_LOCK) > 1:
        raise DefinitionError(f"{where}: at most one rf.OrderedLock per declaration",
                              reactor=reactor, step=step)
    order = _ORDER if step is None else _STEP_ORDER
    return tuple(sorted(bound, key=lambda b: (order[b.kind], b.index)))


def _check_template(gate: Gate, where: str, available: Sequence[str], reactor: str,
                    step: str | None, secrets: Mapping[str, Any]) -> None:
    assert isinstance(gate.key, str)
    for field, root in template_fields(gate.key):
        if root not in available:
            what = "the step's parameters" if step is not None else "the reactor's inputs"
            raise DefinitionError(
                f"{where}: {gate.label} key template names {root!r}, which is not one of "
                f"{what} ({', '.join(available) or 'none'})",
                reactor=reactor, step=step)
        if reads_secret(secrets, field):
            raise DefinitionError(
                f"{where}: {gate.label} key template {gate.key!r} formats {field!r}, which is "
                "rf.Redacted: a gate key is stored and shown (rf.GateBusy.key, logs, run.steps), "
                "so it would leak the value; key on a field that is not secret, or pass a "
                "callable key that derives a safe key (a hash, say)",
                reactor=reactor, step=step)
