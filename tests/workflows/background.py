"""Reactors whose work runs in workers (embedded or `reactorflow worker` subprocesses).

Steps note what they do, with their process id, in the file named by REACTORFLOW_TEST_LOG, so
a test can tell which process ran a step and how many times.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import msgspec

import reactorflow as rf

LOG_ENV = "REACTORFLOW_TEST_LOG"
GATE_ENV = "REACTORFLOW_TEST_GATE"
LOCK_TTL_ENV = "REACTORFLOW_TEST_LOCK_TTL"

NAMESPACE_ENV = "REACTORFLOW_TEST_NAMESPACE"
HEARTBEAT_ENV = "REACTORFLOW_TEST_HEARTBEAT"
"""Set: the worker subprocesses beat every this many seconds (the heartbeat tests)."""
AMQP_ENV = "REACTORFLOW_TEST_AMQP_URL"
"""Set (the RabbitMQ lane): the broker is a RabbitmqBroker there instead of a RedisBroker."""

if os.environ.get(LOCK_TTL_ENV):  # worker subprocesses of the tests: a short lock TTL
    rf.configure(lock_ttl=float(os.environ[LOCK_TTL_ENV]), stall_timeout=0.5)
if os.environ.get(HEARTBEAT_ENV):
    rf.configure(heartbeat_interval=float(os.environ[HEARTBEAT_ENV]))


def namespaced(url: str, namespace: str) -> tuple[rf.Storage, object]:
    """Storage and broker confined to `namespace` (keys `<namespace>:*`, queues
    `<namespace>-dramatiq:*`), as the tests and their worker subprocesses share them; with
    REACTORFLOW_TEST_AMQP_URL set, the broker is a RabbitmqBroker on that server (whose
    queues the RabbitMQ lane purges between tests)."""
    amqp = os.environ.get(AMQP_ENV)
    if amqp:
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        return rf.RedisStorage.from_url(url, namespace=namespace), RabbitmqBroker(url=amqp)
    from dramatiq.brokers.redis import RedisBroker

    return (rf.RedisStorage.from_url(url, namespace=namespace),
            RedisBroker(url=url, namespace=f"{namespace}-dramatiq"))


if os.environ.get(NAMESPACE_ENV) and os.environ.get("REACTORFLOW_REDIS_URL"):
    _storage, _broker = namespaced(os.environ["REACTORFLOW_REDIS_URL"], os.environ[NAMESPACE_ENV])
    rf.configure(storage=_storage, broker=_broker)


def note(line: str) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{line} pid={os.getpid()}\n")


def notes(path: str | Path) -> list[str]:
    """The lines noted so far, without their pid."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line.rsplit(" pid=", 1)[0] for line in text.splitlines()]


def pids(path: str | Path, what: str) -> set[int]:
    text = Path(path).read_text(encoding="utf-8")
    return {int(line.rsplit(" pid=", 1)[1]) for line in text.splitlines()
            if line.rsplit(" pid=", 1)[0] == what}


async def wait_for_gate(name: str) -> None:
    """Block until the gate file `<GATE dir>/<name>` exists (a test opens it)."""
    gate = Path(os.environ.get(GATE_ENV, "/nonexistent")) / name
    deadline = time.monotonic() + 30
    while not gate.exists() and time.monotonic() < deadline:
        await anyio.sleep(0.01)


# -- a whole run in a worker ---------------------------------------------------------------------

dispatched = rf.Reactor("tests.bg.dispatched")


@dispatched.step
async def only() -> int:
    note("only")
    return 42


always = rf.Reactor("tests.bg.always", always_dispatch=True)


@always.step
async def anywhere() -> str:
    note("anywhere")
    return "done"


# -- a hand-off point ----------------------------------------------------------------------------

handoff = rf.Reactor("tests.bg.handoff")


@handoff.step
async def h1() -> str:
    note("h1")
    return "h1"


@handoff.step
async def h2(h1: str) -> str:
    note("h2")
    return h1 + "h2"


@handoff.step
async def h3(h2: str) -> str:
    note("h3")
    return h2 + "h3"


handoff.background(after="h1")

before = rf.Reactor("tests.bg.before")


@before.step
async def b1() -> str:
    note("b1")
    return "b1"


@before.step
async def b2(b1: str) -> str:
    note("b2")
    return b1 + "b2"


before.background(before="b2")


class SkipIn(msgspec.Struct):
    skip: bool


never_reached = rf.Reactor("tests.bg.never_reached", inputs=SkipIn)


@never_reached.step(when=lambda skip: not skip)
async def cut(skip: bool) -> str:
    note("cut")
    return "cut"


@never_reached.step
async def tail(cut: str = "skipped") -> str:
    note("tail")
    return f"tail after {cut}"


never_reached.background(after="cut")


# -- async units ---------------------------------------------------------------------------------


class UnitIn(msgspec.Struct):
    order_id: str
    fail: bool = False
    gate: str = ""


units = rf.Reactor("tests.bg.units", inputs=UnitIn)


@units.async_step(retries=rf.Retry(attempts=2, backoff=0))
async def send_email(order_id: str, fail: bool, gate: str, ctx: rf.StepContext) -> str:
    note(f"send_email attempt {ctx.attempt}")
    if gate:
        await wait_for_gate(gate)
    if fail:
        raise ConnectionError("smtp down")
    return f"mail:{order_id}"


@send_email.compensate
async def unsend(error: Exception, order_id: str) -> None:
    note(f"unsend {type(error).__name__}")


@units.step
async def sibling(order_id: str) -> str:
    note("sibling")
    return "sibling"


@sibling.undo
async def unsibling(result: str) -> None:
    note("undo sibling")


@units.step
async def tolerant(send_email: rf.Outcome[str]) -> str:
    note(f"tolerant ok={send_email.ok}")
    return f"ok={send_email.ok} value={send_email.value}"


@units.step
async def strict(send_email: str, sibling: str) -> str:
    note(f"strict read {send_email}")
    return f"{send_email}+{sibling}"


fire_and_forget = rf.Reactor("tests.bg.fire_and_forget", inputs=UnitIn)


@fire_and_forget.step
async def first_thing(order_id: str) -> str:
    note("first_thing")
    return order_id


@fire_and_forget.async_step
async def background_mail(first_thing: str, gate: str) -> str:
    if gate:
        await wait_for_gate(gate)
    note("background_mail")
    return f"mail:{first_thing}"


# -- an async child reactor ----------------------------------------------------------------------


class ChildIn(msgspec.Struct):
    n: int
    fail: bool = False


child = rf.Reactor("tests.bg.child", inputs=ChildIn)


@child.step
async def grow(n: int, fail: bool) -> int:
    note("grow")
    if fail:
        raise ValueError("child fails")
    return n * 10


@grow.undo
async def shrink(result: int) -> None:
    note("undo grow")


class ParentIn(msgspec.Struct):
    n: int
    child_fails: bool = False
    parent_fails: bool = False


parent = rf.Reactor("tests.bg.parent", inputs=ParentIn)


@parent.async_reactor(child)
async def spawn(n: int, child_fails: bool) -> ChildIn:
    return ChildIn(n=n, fail=child_fails)


@parent.step
async def read_child(spawn: rf.Outcome[int], parent_fails: bool) -> str:
    note(f"read_child ok={spawn.ok}")
    if parent_fails:
        raise RuntimeError("parent fails after the child")
    return f"child ok={spawn.ok} value={spawn.value}"


# -- resume in a worker --------------------------------------------------------------------------


class Approval(msgspec.Struct):
    ok: bool


late = rf.Reactor("tests.bg.late")


@late.step
async def before_pause() -> str:
    note("before_pause")
    return "ready"


@late.interrupt(resume="background")
async def approve(payload: Approval, before_pause: str) -> bool:
    note("approve")
    return payload.ok


@late.step
async def after_pause(approve: bool) -> str:
    note("after_pause")
    return f"approved={approve}"


# -- a run to kill -------------------------------------------------------------------------------

killable = rf.Reactor("tests.bg.killable")


@killable.step
async def k1() -> str:
    note("k1")
    return "k1"


@killable.step
async def k2(k1: str, ctx: rf.StepContext) -> str:
    note(f"k2 start {ctx.idempotency_key}")
    await wait_for_gate("k2")
    note("k2 done")
    return "k2"


@killable.step
async def k3(k2: str) -> str:
    note("k3")
    return "k3"


# -- a map fanned out over the workers -------------------------------------------------------------


class Fleet(msgspec.Struct):
    items: list[int]


fleet = rf.Reactor("tests.bg.fleet", inputs=Fleet)


@fleet.map_step(over="items", fan_out=True, batch_size=16)
async def haul(item: int) -> int:
    note(f"haul {item}")
    await anyio.sleep(0.002)
    return item * 3


# -- a fanned-out map in chunks, one of them cut off mid-chunk by a SIGKILL ------------------------

CHUNK = 10
"""`pack`'s chunk (and window): its first job carries elements 0-9."""
HANG_AT = 4
"""In the doomed worker (`DOOMED_ENV`), element `HANG_AT`'s first execution hangs mid-body."""

chunked_fleet = rf.Reactor("tests.bg.chunked", inputs=Fleet)


def executions_key(namespace: str) -> str:
    """The Redis hash counting each `pack` element's executions (it survives a killed
    worker): element index -> how many times its body started."""
    return f"{namespace}:test:pack-runs"


@chunked_fleet.map_step(over="items", fan_out=True, batch_size=CHUNK, chunk_size=CHUNK)
async def pack(item: int) -> int:
    import redis

    client = redis.Redis.from_url(os.environ["REACTORFLOW_REDIS_URL"])
    runs = client.hincrby(executions_key(os.environ[NAMESPACE_ENV]), str(item), 1)
    client.close()
    if os.environ.get(DOOMED_ENV) and item == HANG_AT and runs == 1:
        note(f"pack-hangs {item}")
        await anyio.sleep_forever()  # until the test SIGKILLs this worker
    return item * 2


# -- a fanned-out map rolled back by undo jobs in the workers --------------------------------------

DOOMED_ENV = "REACTORFLOW_TEST_DOOMED"
"""Set in the worker a test will SIGKILL: its undos of elements below HANG_BELOW hang there."""
HANG_BELOW = 100

unhaul_fleet = rf.Reactor("tests.bg.unhaul", inputs=Fleet)


def undo_keys(namespace: str) -> tuple[str, str]:
    """Redis keys of the undo side effects (they survive a killed worker): the set of undone
    elements, and the list of every undo call (a cut-off undo appears twice)."""
    return f"{namespace}:test:undone", f"{namespace}:test:undo-calls"


@unhaul_fleet.map_step(over="items", fan_out=True, batch_size=8)
async def carry(item: int) -> int:
    await anyio.sleep(0.001)
    return item * 3


@carry.undo
async def uncarry(result: int, item: int) -> None:
    import redis

    undone, calls = undo_keys(os.environ[NAMESPACE_ENV])
    client = redis.Redis.from_url(os.environ["REACTORFLOW_REDIS_URL"])
    doomed = bool(os.environ.get(DOOMED_ENV))
    if doomed:  # noted before the call is counted: every call the kill cuts off is noted
        note(f"uncarry-starts {item}")
    client.rpush(calls, item)
    if doomed and item < HANG_BELOW:
        note(f"uncarry-hangs {item}")
        await anyio.sleep_forever()  # until the test SIGKILLs this worker
    await anyio.sleep(0.002)
    client.sadd(undone, item)
    client.close()
    if doomed:
        note(f"uncarry-ends {item}")


@unhaul_fleet.step
async def deliver(carry: list[int]) -> None:
    raise RuntimeError("the delivery failed")
