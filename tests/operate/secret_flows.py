"""A reactor with redacted inputs, payload and results, for the CLI and HTTP API tests (its
subprocesses import it with `--app tests.operate.secret_flows`)."""

from __future__ import annotations

from typing import Annotated

import msgspec

import reactorflow as rf

API_KEY = "key-5eCr3t-42"
OTP = "otp-88231"
SECRETS = (API_KEY, OTP)
SEEN: list[tuple[str, str]] = []  # what the steps received (in this process)


class Account(msgspec.Struct):
    user: str
    api_key: Annotated[str, rf.Redacted]


class Otp(msgspec.Struct):
    code: Annotated[str, rf.Redacted]
    ok: bool = True


accounts = rf.Reactor("ops.secrets", inputs=Account)


@accounts.step
async def connect(user: str, api_key: str) -> Annotated[str, rf.Redacted]:
    SEEN.append(("connect", api_key))
    return f"session-{api_key}"


@accounts.interrupt
async def confirm(payload: Otp, connect: str) -> Otp:
    SEEN.append(("confirm", payload.code))
    return payload


@accounts.step
async def finish(connect: str, confirm: Otp, user: str) -> str:
    if not confirm.ok:
        raise PermissionError(f"{user} refused code {confirm.code} on {connect}")
    return f"done for {user}"
