"""Operating an ordered lock's line by hand: `rf.ordered_peek`, `rf.ordered_skip`,
`rf.ordered_reset` (on the configured storage; keys as their templates rendered them, the
`key` of `rf.GateBusy` and of `run.steps[...].gate`)."""

from __future__ import annotations

from reactorflow import config
from reactorflow.errors import NotInLine, ReactorflowError
from reactorflow.storage.contract.values import OrderedLine


def _check_key(key: object, what: str) -> str:
    if not isinstance(key, str) or not key:
        raise ReactorflowError(
            f"{what}: key={key!r} must be an ordered lock's key as its template rendered it, "
            "a non-empty str (e.g. 'ledger:acct-9' for rf.OrderedLock('ledger:{account_id}')); "
            "nothing was changed")
    return key


async def ordered_peek(key: str) -> OrderedLine:
    """An ordered lock's line as it stands: whose turn it is, when that holder last showed
    progress, and how many tickets wait behind it (read only).

    Args:
        key: The ordered lock's key, as its template rendered it (`'ledger:acct-9'`).

    Raises:
        ReactorflowError: `key` is not a non-empty str.
        StorageError: The storage failed.
    """
    return await config.current_storage().ordered_peek(_check_key(key, "rf.ordered_peek"))


async def ordered_skip(key: str, ticket: str | None = None) -> str:
    """Pass over a stuck ticket now, without waiting for the lock's `poison_pill_timeout`: its
    place is finished and the turn passes on (waiters are notified). Its run, if it comes
    back, takes a new place at the end of the line.

    Args:
        key: The ordered lock's key, as its template rendered it.
        ticket: The ticket to take out: a run id (a reactor's ordered lock) or
            `<run id>|<step>` (a step's); None: whoever holds the turn now.

    Returns:
        The ticket taken out.

    Raises:
        NotInLine: `ticket` is not in the line (or, with None, the line is empty).
        ReactorflowError: `key` is not a non-empty str, or `ticket` not a str.
        StorageError: The storage failed.
    """
    _check_key(key, "rf.ordered_skip")
    if ticket is not None and (not isinstance(ticket, str) or not ticket):
        raise ReactorflowError(f"rf.ordered_skip: ticket={ticket!r} must be a run id (or "
                               "'<run id>|<step>'), or None for whoever holds the turn; "
                               "nothing was changed")
    storage = config.current_storage()
    if ticket is None:
        ticket = (await storage.ordered_peek(key)).turn
        if ticket is None:
            raise NotInLine(key, None)
    if not await storage.ordered_skip(key, ticket):
        raise NotInLine(key, ticket)
    return ticket


async def ordered_reset(key: str) -> int:
    """Delete an ordered lock's line: numbering starts again. The runs that were in line take
    new places in the order they next ask for their turn (the run holding the turn keeps
    running). Meant for a line left in a bad state; prefer `ordered_skip` for one stuck run.

    Args:
        key: The ordered lock's key, as its template rendered it.

    Returns:
        How many tickets were in line.

    Raises:
        ReactorflowError: `key` is not a non-empty str.
        StorageError: The storage failed.
    """
    return await config.current_storage().ordered_reset(_check_key(key, "rf.ordered_reset"))
