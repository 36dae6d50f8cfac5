"""The external ledger: every side effect of the chaos reactors, and every fault, in one log.

The ledger is a redis-server of its own (never faulted). Each record is appended by one Lua
call that takes the next number of a counter (`seq`) and the server's clock (`TIME`), so all
records — written by any worker, the driver or the fault scheduler — share one order and one
clock: that is what lets the checker see two holders overlap, or an effect applied again after
its checkpoint.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import redis

LOG_KEY = "chaos:ledger"
SEQ_KEY = "chaos:seq"

# KEYS[1] the counter, KEYS[2] the log; ARGV[1] the record's JSON body without seq and t.
# Returns the record's seq.
_APPEND = """
local seq = redis.call('INCR', KEYS[1])
local now = redis.call('TIME')
redis.call('RPUSH', KEYS[2], seq .. ' ' .. now[1] .. '.' .. string.format('%06d', now[2])
           .. ' ' .. ARGV[1])
return seq
"""


class Entry(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a writer says; the ledger adds `seq` and `t`.

    kind: `step.start`, `step.end`, `step.fail`, `elem.*`, `intr.*`, `undo.*`, `comp.*`,
        `gate.enter`, `gate.leave`, `submit.try`, `submit.ok`, `fault.<name>`.
    key: the idempotency key of the effect (a fault: its target), the gate key for gates.
    """

    kind: str
    key: str = ""
    run: str = ""
    pgid: int = 0
    token: str = ""
    gate: str = ""  # gates: "lock", "semaphore:<limit>", "rate:<limit>/<window>", "ordered"
    note: str = ""


class Record(msgspec.Struct, frozen=True):
    """One ledger record as read back: its place in the one order, the ledger's clock, and
    what was written."""

    seq: int
    t: float
    kind: str
    key: str = ""
    run: str = ""
    pgid: int = 0
    token: str = ""
    gate: str = ""
    note: str = ""


_encoder = msgspec.json.Encoder()
_entry_decoder = msgspec.json.Decoder(Entry)


class Ledger:
    """A writer (and reader) of the ledger at `url` (thread-safe: redis-py's pool)."""

    def __init__(self, url: str) -> None:
        self._redis = redis.Redis.from_url(url, socket_timeout=10)
        self._append = self._redis.register_script(_APPEND)

    def write(self, entry: Entry) -> int:
        """Append `entry` (its pgid filled in with this process group's); returns its seq."""
        if not entry.pgid:
            entry = msgspec.structs.replace(entry, pgid=os.getpgrp())
        return int(self._append(keys=[SEQ_KEY, LOG_KEY], args=[_encoder.encode(entry)]))

    def record(self, kind: str, key: str = "", run: str = "", **fields: Any) -> int:
        """`write(Entry(kind, key, run, **fields))`."""
        return self.write(Entry(kind=kind, key=key, run=run, **fields))

    def read(self) -> list[Record]:
        """Every record, in seq order."""
        return [parse(raw) for raw in self._redis.lrange(LOG_KEY, 0, -1)]

    def close(self) -> None:
        self._redis.close()


def parse(raw: bytes | str) -> Record:
    """A stored line (`<seq> <time> <json>`) as a Record."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    seq, t, body = text.split(" ", 2)
    entry = _entry_decoder.decode(body)
    return Record(int(seq), float(t), **msgspec.structs.asdict(entry))
