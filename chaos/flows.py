"""The chaos reactors: realistic workflows whose every side effect goes to the ledger.

Imported by the harness (which dispatches runs and answers interrupts), by every
`reactorflow worker`, `sweep` and `scheduler` process it starts, and configured from the
environment those processes share (`configure_from_env`).

Each effect — a step body, an undo, a compensate, a map element, a gate-held section — writes a
`<kind>.start` record with a fresh token, does its work, and writes `<kind>.end` with the same
token (or `<kind>.fail`). A step returns its token, so the checkpointed result names the one
application that storage kept; the checker compares it with every application the ledger saw.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import anyio
import msgspec

import reactorflow as rf
from chaos.ledger import Ledger

STORAGE_ENV = "CHAOS_STORAGE_URL"
BROKER_ENV = "CHAOS_BROKER_URL"  # redis://... (a RedisBroker) or amqp://... (RabbitmqBroker)
LEDGER_ENV = "CHAOS_LEDGER_URL"
NAMESPACE_ENV = "CHAOS_NAMESPACE"
RATE_ENV = "CHAOS_RATE_PER_MINUTE"
LOCK_TTL = 2.0  # the run liveness lock: a zombie is stopped well past it
GATE_TTL = 3.0  # the Lock / Semaphore places
SEMAPHORE_LIMIT = 2
RATE_PER_MINUTE = int(os.environ.get(RATE_ENV, "30"))
RATE_WINDOW = 60.0

_ledger: Ledger | None = None


def ledger() -> Ledger:
    """The ledger named by CHAOS_LEDGER_URL (one per process)."""
    global _ledger
    if _ledger is None:
        _ledger = Ledger(os.environ[LEDGER_ENV])
    return _ledger


CODEC_KEY_ID = "chaos-1"
"""Every chaos process seals the values it stores (a fixed key: the harness guards no secret,
it proves that sealing holds under the faults as the rest does)."""


def configure_from_env() -> None:
    """Storage, broker, the codec and the short timings of the chaos lanes, from the
    environment."""
    storage_url = os.environ[STORAGE_ENV]
    broker_url = os.environ[BROKER_ENV]
    namespace = os.environ.get(NAMESPACE_ENV, "chaos")
    broker: Any
    if broker_url.startswith("amqp"):
        from dramatiq.brokers.rabbitmq import RabbitmqBroker  # noqa: PLC0415 - lane-only

        broker = RabbitmqBroker(url=broker_url)
    else:
        from dramatiq.brokers.redis import RedisBroker  # noqa: PLC0415 - lane-only

        broker = RedisBroker(url=broker_url, namespace=f"{namespace}-dramatiq")
    codec = rf.EncryptionCodec(keys={CODEC_KEY_ID: bytes(range(32))}, current=CODEC_KEY_ID)
    rf.configure(storage=rf.RedisStorage.from_url(storage_url, namespace=namespace),
                 broker=broker, codec=codec, lock_ttl=LOCK_TTL, stall_timeout=1.0,
                 async_wait_timeout=10.0)


if os.environ.get(STORAGE_ENV) and os.environ.get(BROKER_ENV):
    configure_from_env()


# ---- the effects -------------------------------------------------------------------------


async def _work() -> None:
    await anyio.sleep(random.uniform(0.005, 0.04))  # widen the windows faults can hit


async def apply(kind: str, ctx: rf.StepContext, *, fail: bool = False,
                compensated: bool = False) -> str:
    """One application of an effect of `kind` under `ctx.idempotency_key`; returns its token.

    With `fail`, it records `<kind>.fail` and raises (`compensated`: a compensate handler is
    declared, so the checker expects one).
    """
    token = uuid.uuid4().hex
    book = ledger()
    book.record(f"{kind}.start", ctx.idempotency_key, ctx.run_id, token=token)
    await _work()
    if fail:
        book.record(f"{kind}.fail", ctx.idempotency_key, ctx.run_id, token=token,
                    note="compensated" if compensated else "")
        raise RuntimeError(f"chaos: {ctx.idempotency_key} fails by design")
    book.record(f"{kind}.end", ctx.idempotency_key, ctx.run_id, token=token)
    return token


@contextmanager
def held(gate: str, key: str, ctx: rf.StepContext) -> Iterator[None]:
    """A gate-held section: `gate.enter` ... `gate.leave`, keyed by the gate's key."""
    token = uuid.uuid4().hex
    book = ledger()
    book.record("gate.enter", key, ctx.run_id, token=token, gate=gate, note=ctx.idempotency_key)
    try:
        yield
    finally:
        book.record("gate.leave", key, ctx.run_id, token=token, gate=gate,
                    note=ctx.idempotency_key)


# ---- a diamond saga: a -> (b, c) -> d, every step undone, d compensated --------------------


class Saga(msgspec.Struct):
    n: int
    fail: bool = False


saga = rf.Reactor("chaos.saga", inputs=Saga)


@saga.step
async def reserve(n: int, ctx: rf.StepContext) -> str:
    return await apply("step", ctx)


@saga.step(retries=rf.Retry(attempts=2, backoff=0))
async def charge(reserve: str, ctx: rf.StepContext) -> str:
    return await apply("step", ctx)


@saga.step
async def notify(reserve: str, ctx: rf.StepContext) -> str:
    return await apply("step", ctx)


@saga.step
async def ship(charge: str, notify: str, fail: bool, ctx: rf.StepContext) -> str:
    return await apply("step", ctx, fail=fail, compensated=True)


async def _undo(_result: str, ctx: rf.StepContext) -> None:
    await apply("undo", ctx)


async def _compensate(_error: Exception, ctx: rf.StepContext) -> None:
    await apply("comp", ctx)


reserve.undo(_undo)
charge.undo(_undo)
notify.undo(_undo)
ship.undo(_undo)
ship.compensate(_compensate)


# ---- fanned-out maps: atomic (rolled back on a failed element) and not --------------------


class Batch(msgspec.Struct):
    items: list[int]
    fail_item: int = -1


fanout = rf.Reactor("chaos.fanout", inputs=Batch)


@fanout.map_step(over="items", fan_out=True, batch_size=3)
async def pack(item: int, fail_item: int, ctx: rf.StepContext) -> str:
    return await apply("elem", ctx, fail=item == fail_item, compensated=True)


pack.undo(_undo)
pack.compensate(_compensate)


@fanout.step
async def collect(pack: list[str], ctx: rf.StepContext) -> list[str]:
    await apply("step", ctx)
    return list(pack)


survey = rf.Reactor("chaos.survey", inputs=Batch)


@survey.map_step(over="items", fan_out=True, batch_size=3, atomic=False, chunk_size=2)
async def weigh(item: int, ctx: rf.StepContext) -> str:
    return await apply("elem", ctx, fail=item % 4 == 3, compensated=True)


weigh.compensate(_compensate)


@survey.step
async def tally(weigh: list[rf.Outcome[str]], ctx: rf.StepContext) -> list[str]:
    await apply("step", ctx)
    return [o.value if o.ok else "" for o in weigh]


MAP_COLLECTORS = {"chaos.fanout": ("collect", "pack"), "chaos.survey": ("tally", "weigh")}
"""reactor -> (the step whose result lists the element tokens, the map's name)."""


# ---- gated reactors ----------------------------------------------------------------------


class Account(msgspec.Struct):
    account: str
    n: int = 0


locked = rf.Reactor("chaos.locked", inputs=Account)


@locked.step(gates=[rf.Lock("chaos-lock:{account}", ttl=GATE_TTL)])
async def payout(account: str, ctx: rf.StepContext) -> str:
    with held("lock", f"chaos-lock:{account}", ctx):
        return await apply("step", ctx)


pooled = rf.Reactor("chaos.pooled", inputs=Account)


@pooled.step(gates=[rf.Semaphore("chaos-sem:{account}", limit=SEMAPHORE_LIMIT, ttl=GATE_TTL)])
async def pick(account: str, ctx: rf.StepContext) -> str:
    with held(f"semaphore:{SEMAPHORE_LIMIT}", f"chaos-sem:{account}", ctx):
        return await apply("step", ctx)


rated = rf.Reactor("chaos.rated", inputs=Account)


@rated.step(gates=[rf.RateLimit("chaos-rate", minute=RATE_PER_MINUTE)])
async def call_api(account: str, ctx: rf.StepContext) -> str:
    with held(f"rate:{RATE_PER_MINUTE}/{RATE_WINDOW:g}", "chaos-rate", ctx):
        return await apply("step", ctx)


ordered = rf.Reactor("chaos.ordered", inputs=Account,
                     gates=[rf.OrderedLock("chaos-ord:{account}")])


@ordered.step
async def post_entry(account: str, ctx: rf.StepContext) -> str:
    with held("ordered", f"chaos-ord:{account}", ctx):
        return await apply("step", ctx)


# ---- an interrupt the harness answers -----------------------------------------------------


class Approval(msgspec.Struct):
    by: str


approval = rf.Reactor("chaos.approval", inputs=Saga)


@approval.step
async def draft(n: int, ctx: rf.StepContext) -> str:
    return await apply("step", ctx)


@approval.interrupt(resume="background")
async def approve(payload: Approval, draft: str, ctx: rf.StepContext) -> str:
    return await apply("intr", ctx)


@approval.step
async def publish(approve: str, ctx: rf.StepContext) -> str:
    return await apply("step", ctx)


INTERRUPTS = {"chaos.approval": "approve"}


# ---- a schedule: one run per minute, every missed tick caught up --------------------------


class Tick(msgspec.Struct):
    tick: str


def _tick_inputs(tick: datetime) -> Tick:
    return Tick(tick=tick.isoformat())


ticker = rf.Reactor("chaos.ticker", inputs=Tick, schedules=[
    rf.Schedule("* * * * *", inputs=_tick_inputs, catch_up="all", name="minutely")])


@ticker.step
async def tock(tick: str, ctx: rf.StepContext) -> str:
    return await apply("step", ctx)


# ---- a sleep between two effects: the timer fires once, never early ------------------------


class Nap(msgspec.Struct):
    n: int
    seconds: float = 1.0


napper = rf.Reactor("chaos.napper", inputs=Nap)


@napper.step
async def doze(n: int, ctx: rf.StepContext) -> str:
    return await apply("step", ctx)


@napper.sleep
async def nap(doze: str, seconds: float) -> float:
    return seconds


@napper.step
async def woke(nap: datetime, ctx: rf.StepContext) -> str:
    # the timer's fire, as the run saw it: its deadline beside the ledger's clock
    ledger().record("timer.fire", ctx.idempotency_key, ctx.run_id, token=uuid.uuid4().hex,
                    note=repr(nap.timestamp()))
    return await apply("step", ctx)


# ---- what the checker reads from storage -------------------------------------------------


def committed_tokens(run: rf.Run) -> dict[str, str]:
    """Idempotency key -> the token of the application storage kept, for every effect of
    `run` that storage says completed (steps, interrupts and map elements)."""
    tokens: dict[str, str] = {}
    for key, state in run.steps.items():
        if state.status not in (rf.StepStatus.COMPLETED, rf.StepStatus.UNDONE):
            continue
        result = state.result
        if isinstance(result, str) and result:
            tokens[f"{run.id}:{key}"] = result
    collector = MAP_COLLECTORS.get(run.reactor)
    if collector is not None:
        step, map_name = collector
        state = run.steps.get(step)
        if state is not None and isinstance(state.result, list):
            for index, token in enumerate(state.result):
                if token:
                    tokens[f"{run.id}:{map_name}:{index}"] = token
    return tokens
