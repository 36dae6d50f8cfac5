"""The one place a stored record's decoding failure becomes `CorruptRecord`: every read that
decodes stored bytes or fields (a head's numbers, a key of the wrong Redis type, a msgpack
record) does it inside `reading(run_id, field)`, so no bare `ValueError`, `TypeError` or
`msgspec.DecodeError` ever escapes a read, and the error names the run and the field."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from reactorflow.errors import CorruptRecord

DECODE_FAILURES: tuple[type[Exception], ...] = (ValueError, TypeError, OverflowError, KeyError,
                                                IndexError)
"""What decoding a damaged value raises (msgspec's `DecodeError` and `ValidationError`, and
`UnicodeDecodeError`, are `ValueError`s)."""
REASON_LIMIT = 300
"""Characters of the underlying error kept in the reason."""


@contextmanager
def reading(run_id: str, field: str, key: str | None = None) -> Iterator[None]:
    """Decode part `field` of run `run_id`'s record (read from storage `key`) in the body: any
    decoding failure becomes `CorruptRecord` naming them (one already raised passes as is).

    Raises:
        CorruptRecord: the body failed to decode it.
    """
    try:
        yield
    except DECODE_FAILURES as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise CorruptRecord(run_id, reason[:REASON_LIMIT], field=field, key=key) from exc


def number(run_id: str, field: str, value: object, key: str | None = None) -> float:
    """A stored number (a head's `created` or `touched`), or `CorruptRecord`.

    Raises:
        CorruptRecord: it is missing or not a number.
    """
    with reading(run_id, field, key):
        if value is None:
            raise ValueError("missing")
        return float(value)  # type: ignore[arg-type]


WRONG_TYPE = "WRONGTYPE"
"""How Redis starts its reply to a command on a key holding another type."""


def wrong_type(run_id: str, key: str, reply: BaseException) -> CorruptRecord | None:
    """`CorruptRecord` for a Redis error reply `reply` to a read of the run's `key`, when the
    key holds the wrong type of value; None for any other error."""
    if WRONG_TYPE not in str(reply):
        return None
    return CorruptRecord(run_id, "the key holds another type of value than reactorflow stores "
                         "there (something else wrote it)", field="key", key=key)
