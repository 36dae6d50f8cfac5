"""Retry tokens of `RedisStorage`'s scripts: unique per call, with no system call per call."""

from __future__ import annotations

import itertools
import os
import secrets
from typing import Any

_TOKENS: list[Any] = []  # [per-process random prefix, counter]: set by _seed_tokens


def _seed_tokens() -> None:
    """A fresh random prefix (also in a forked child, which must not repeat its parent's)."""
    _TOKENS[:] = [secrets.token_hex(8), itertools.count(1)]


_seed_tokens()
os.register_at_fork(after_in_child=_seed_tokens)


def token() -> str:
    """Unique per call: a random per-process prefix and a counter (no system call per write)."""
    return f"{_TOKENS[0]}{next(_TOKENS[1]):x}"
