"""Waiting on the command line: `--wait [--timeout SECONDS]` on the commands that can return
before their run settles, and `reactorflow runs watch`.

Exit statuses (see docs/operating.md): 0 the command did what was asked (with `--wait`, the run
settled: completed, failed, halted, cancelled, aborted, held, or paused), 1 an error,
2 a bad option, 3 the wait timed out (one line naming the run and its status), 130 Ctrl-C.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
import msgspec

from reactorflow import clock, config
from reactorflow.errors import WaitTimeout
from reactorflow.records import Event
from reactorflow.runtime.ops.lookup import get_run
from reactorflow.snapshot import Run

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

EXIT_TIMED_OUT = 3
POLL = 0.5
"""Seconds between two re-reads of a watched run: step checkpoints are not notified (only
status changes are), so `runs watch` re-reads to show steps as they are stored."""
F = TypeVar("F", bound=Callable[..., Any])


def wait_options(function: F) -> F:
    """`--wait` and `--timeout SECONDS`, the options of the commands that can return before
    their run settles."""
    function = click.option(
        "--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
        help="With --wait: give up after this many seconds (exit status 3).")(function)
    return click.option(
        "--wait", "wait", is_flag=True,
        help="Wait until the run settles (completed, failed, halted, cancelled, aborted, held "
             "or paused), then print it.")(function)


def check_wait(wait: bool, timeout: float | None) -> None:
    """Refuse `--timeout` without `--wait`."""
    if timeout is not None and not wait:
        raise click.UsageError("--timeout only applies with --wait: add --wait")


async def settled(reactor: Reactor, run: Run, wait: bool, timeout: float | None) -> Run:
    """`run`, or with `wait` the run once it settled (raises `WaitTimeout` after `timeout`).

    Raises:
        WaitTimeout: It did not settle within `timeout` seconds.
    """
    if not wait or run.status.is_settled:
        return run
    return await reactor.wait(run.id, timeout=timeout)


async def watch(run_id: str, timeout: float | None, show: Callable[[Event], None]) -> Run:
    """Hand each event of run `run_id`'s history to `show` as it is stored (the ones already
    stored first), until the run settles; returns the run as it settled.

    Like `wait`: subscribe to the run's channel, read the run, then wait for a notification or
    `POLL` seconds, whichever comes first, and read it again. Each event is shown once (the
    history is in the order events happened, so a late checkpoint of a concurrent step may
    show an event older than the last one shown).

    Raises:
        RunNotFound: No such run.
        WaitTimeout: It did not settle within `timeout` seconds.
    """
    deadline = None if timeout is None else clock.monotonic() + timeout
    shown: Counter[bytes] = Counter()
    async with config.current_storage().subscribe(run_id) as subscription:
        while True:
            run = await get_run(run_id)
            seen: Counter[bytes] = Counter()
            for event in run.history:
                key = msgspec.msgpack.encode(event)
                seen[key] += 1
                if seen[key] > shown[key]:
                    shown[key] += 1
                    show(event)
            if run.status.is_settled:
                return run
            wait = POLL
            if deadline is not None:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    assert timeout is not None
                    raise WaitTimeout(run_id, timeout, run.status)
                wait = min(wait, remaining)
            await subscription.wait(wait)
