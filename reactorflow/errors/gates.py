"""Errors raised by gates (locks, semaphores, rate limits, periods, ordered locks)."""

from __future__ import annotations

from reactorflow.errors.core import ArgumentError, ReactorflowError, shown


class GateBusy(ReactorflowError):
    """A gate (lock, semaphore, rate limit, period, ordered lock) stayed busy past its `wait`.

    `gate` is its kind (`"lock"`, `"semaphore"`, `"rate_limit"`, `"period"`,
    `"ordered_lock"`), `key` the key as the template rendered it, `retry_after` the seconds
    until a rate-limit window frees (`None` for the other gates).

    Attributes:
        gate: What gate (`"lock"`, `"semaphore"`, `"rate_limit"`, `"period"`,
            `"ordered_lock"`).
        key: The key as built.
        waited: The seconds waited.
        retry_after: Seconds until a rate-limit window frees (`None` for the other gates).
    """

    def __init__(self, gate: str, key: str, *, waited: float = 0.0,
                 retry_after: float | None = None, run_id: str | None = None,
                 step: str | None = None) -> None:
        where = f" for step {step!r}" if step else ""
        hint = (f"; a window frees in {retry_after:.3g}s" if retry_after is not None
                else "; another run holds it")
        super().__init__(
            f"{gate} {shown(key)}{where} stayed busy for {waited:g}s{hint}. Raise its wait= "
            "to queue longer, or try again later.", run_id=run_id, step=step)
        self.gate = gate
        self.key = key
        self.waited = waited
        self.retry_after = retry_after


class GateKeyError(ArgumentError):
    """A gate's key could not be built at run time (it rendered empty, named a missing value,
    or its callable raised or returned something other than text).

    Attributes:
        gate: What gate.
        template: The key's template (or the callable's name).
        reason: Why the key could not be built.
    """

    def __init__(self, gate: str, template: str, reason: str, *, run_id: str | None = None,
                 step: str | None = None) -> None:
        where = f"step {step!r}" if step else "the reactor"
        super().__init__(f"gate {gate} of {where}: key {template!r} {reason}", run_id=run_id,
                         step=step)
        self.gate = gate
        self.template = template


class GateDeadlock(ReactorflowError):
    """An async unit would need an exclusive gate that its dispatching run holds: it could
    never run while the run waits for it, so the dispatching step fails before enqueueing.

    Attributes:
        gate: What gate.
        key: The key the dispatching run holds.
    """

    def __init__(self, gate: str, key: str, *, run_id: str, step: str) -> None:
        super().__init__(
            f"step {step!r} of run {run_id!r} would dispatch work that needs {gate} "
            f"{shown(key)}, which this run holds: it could never run. Declare the gate on the "
            "dispatching step only, or use another key.", run_id=run_id, step=step)
        self.gate = gate
        self.key = key


class NotInLine(ReactorflowError):
    """`rf.ordered_skip` named a ticket that is not in the ordered lock's line (it finished,
    was passed over or skipped already, or the line was reset).

    Attributes:
        key: The ordered lock's key.
        ticket: The ticket named (None: the line was empty, nobody holds the turn).
    """

    def __init__(self, key: str, ticket: str | None) -> None:
        what = (f"ticket {shown(ticket)} is not in" if ticket is not None
                else "nobody holds the turn in")
        super().__init__(f"{what} the line of ordered lock {shown(key)}; nothing was changed. "
                         "rf.ordered_peek(key) shows whose turn it is.")
        self.key = key
        self.ticket = ticket
