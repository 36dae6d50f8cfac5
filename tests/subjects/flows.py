"""Reactors of the subject tests (importable by the CLI's subprocesses with `--app`): each run
is about one customer (`subject="{customer_id}"`), and reaches a paused, sleeping or completed
state. Imported by a CLI subprocess (`SUBJECTS_TEST_CURRENT` set), it configures the codec with
the test keys (a process that reads the same runs must hold them); in the test process it
configures nothing (the fixtures do)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import anyio
import msgspec

import reactorflow as rf

OLD, NEW = "k-2026", "k-2027"
KEYS = {OLD: b"o" * 32, NEW: b"n" * 32}
ROTATED_ENV = "SUBJECTS_TEST_CURRENT"
"""The key id the codec seals with in a process importing this module (default: `OLD`)."""


def codec(current: str | None = None) -> rf.EncryptionCodec:
    """The tests' codec, sealing with `current` (else the environment's, else `OLD`)."""
    return rf.EncryptionCodec(keys=KEYS, current=current or os.environ.get(ROTATED_ENV, OLD))


if ROTATED_ENV in os.environ:  # a CLI subprocess (`--app tests.subjects.flows`): it holds the key
    rf.configure(codec=codec())  # (never in the test process: importing it configures nothing)


class Account(msgspec.Struct):
    customer_id: str
    email: str


class Code(msgspec.Struct):
    code: str


signups = rf.Reactor("subj.signups", inputs=Account, subject="{customer_id}")


@signups.step
async def welcome(email: str) -> str:
    return f"welcome sent to {email}"


@signups.interrupt
async def confirm(payload: Code, welcome: str) -> str:
    return f"{welcome}, confirmed {payload.code}"


reminders = rf.Reactor("subj.reminders", inputs=Account, subject="{customer_id}")


@reminders.step
async def note(email: str) -> str:
    return f"note for {email}"


@reminders.sleep
async def wait_a_day(note: str) -> timedelta:
    return timedelta(days=1)


@reminders.step
async def remind(wait_a_day: datetime, email: str) -> str:
    return f"reminded {email}"


receipts = rf.Reactor("subj.receipts", inputs=Account, subject="{customer_id}")


@receipts.step
async def receipt(email: str) -> str:
    return f"receipt for {email}"


plain = rf.Reactor("subj.plain", inputs=Account)
"""No subject: its values are sealed under the codec's key."""


@plain.step
async def record(email: str) -> str:
    return f"recorded {email}"


holds = rf.Reactor("subj.holds", inputs=Account, subject="{customer_id}", on_failure="hold")


@holds.step
async def charge(email: str) -> str:
    raise ValueError(f"the card of {email} was declined")


busy = rf.Reactor("subj.busy", inputs=Account, subject="{customer_id}")
STARTED: list[anyio.Event] = []
"""Set by `slow` as it starts (a test puts a fresh event here)."""
RELEASE: list[anyio.Event] = []
"""`slow` waits for it (a test puts a fresh event here)."""


@busy.step
async def slow(email: str) -> str:
    STARTED[-1].set()
    await RELEASE[-1].wait()
    return f"slow work for {email}"


@busy.step
async def after_slow(slow: str) -> str:
    return f"after {slow}"
