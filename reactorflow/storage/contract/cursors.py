"""Opaque cursors for listing runs newest first (creation time, then run id)."""

from __future__ import annotations

import base64

from reactorflow.errors import ReactorflowError


def encode_cursor(created_at: float, run_id: str) -> str:
    raw = f"{created_at!r}|{run_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    if cursor is None or cursor == "":
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, run_id = base64.urlsafe_b64decode(padded).decode().split("|", 1)
        return float(created), run_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReactorflowError(
            f"cursor {cursor!r} is not one this library returned; pass back next_cursor as is"
        ) from exc
