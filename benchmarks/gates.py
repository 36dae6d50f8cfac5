"""Gates on RedisStorage, each figure beside its baseline measured in the same run:

1. an uncontended reactor lock: round trips and time one run adds, against the same reactor
   without the lock (and one SET round trip);
2. hand-over: the holder's release (its final save sent) -> the next waiting caller's first
   step, p50 against the floor below (PUBLISH sent on one connection -> the message read on
   another, the marks taken before the round trip that releases or publishes); and its first
   part, release -> the waiter holds the place (the release hands it over and names the
   waiter: no acquire round trip; on one node it also stores the run the waiter queued with:
   no creation round trip), the rest being the start of its first step. Holder and waiter
   share one event loop, as two callers of one process do. The floor is what the contract
   cannot do without, save before release: one scripted write's round trip (an EVALSHA of a
   trivial script writing one key, on the connection the run scripts use) plus the pub/sub
   notification, the p50 of each, measured in the same run; the pub/sub part alone (last
   round's floor) is printed beside it;
3. a rate limiter at `second=1000` under 50 concurrent callers: admitted calls per second,
   against the limit (never above it).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio
import msgspec
import redis.asyncio

import reactorflow as rf
from benchmarks import _redis
from benchmarks._context import Context
from benchmarks._report import Spread, percentile, ratios, settle, time_per_call
from reactorflow.runtime.gates import scope
from reactorflow.runtime.gates.waiting import charge

TITLE = "gates on Redis: uncontended lock, hand-over latency, rate limiter accuracy"
NEEDS_REDIS = True


class Account(msgspec.Struct):
    account_id: str


def _flows(tag: str) -> tuple[rf.Reactor, rf.Reactor]:
    plain = rf.Reactor(f"bench.gates.plain.{tag}", inputs=Account)
    locked = rf.Reactor(f"bench.gates.locked.{tag}", inputs=Account,
                        gates=[rf.Lock("bench:{account_id}")])

    async def work(account_id: str) -> str:
        return account_id

    plain.step(name="work")(work)
    locked.step(name="work")(work)
    return plain, locked


async def _uncontended(ctx: Context, url: str) -> None:
    report = ctx.report
    plain, locked = _flows(uuid.uuid4().hex[:6])
    client = redis.asyncio.Redis.from_url(url)
    runs = ctx.pick(full=300, quick=30)
    counter = iter(range(10**9))

    async def run_plain() -> Any:
        return await plain.run(account_id=f"a{next(counter)}")

    async def run_locked() -> Any:
        return await locked.run(account_id=f"a{next(counter)}")

    try:
        for _ in range(20):
            await run_plain()
            await run_locked()
        t_plain: list[float] = []
        t_locked: list[float] = []
        t_set: list[float] = []
        for _ in range(ctx.reps):
            settle()
            t_set.append(await _redis.set_round_trip(client, "rfbench-gates:set", runs * 3))
            settle()
            t_plain.append(await time_per_call(run_plain, runs))
            settle()
            t_locked.append(await time_per_call(run_locked, runs))
        async with _redis.watch(url) as plain_traffic:
            await run_plain()
        async with _redis.watch(url) as locked_traffic:
            await run_locked()
    finally:
        await client.aclose()
    us = 1e6
    extra = [a - b for a, b in zip(t_locked, t_plain, strict=True)]
    extra_trips = locked_traffic.round_trips - plain_traffic.round_trips
    report.row("baseline: 1-step run without gates", Spread.of(t_plain).scaled(us), "µs/run",
               f"{plain_traffic.round_trips} round trips")
    report.row("1-step run with an uncontended rf.Lock", Spread.of(t_locked).scaled(us),
               "µs/run", f"{locked_traffic.round_trips} round trips; "
                         f"{locked_traffic.breakdown()}")
    report.row("extra per run", Spread.of(extra).scaled(us), "µs",
               f"{ratios(extra, t_set).median:.2f}x one SET round trip")
    report.row("baseline: await client.set(k, 256 B)", Spread.of(t_set).scaled(us), "µs")
    report.verdict("uncontended lock adds <= 1 round trip per run", extra_trips <= 1,
                   f"{extra_trips} extra round trip(s) (the release rides in the final save), "
                   f"{Spread.of(extra).median * us:.0f} µs extra per run")


async def _pubsub_floor(url: str, samples: int) -> list[float]:
    """PUBLISH on one connection -> the message read on another (seconds, each)."""
    sender = redis.asyncio.Redis.from_url(url)
    listener = redis.asyncio.Redis.from_url(url)
    pubsub = listener.pubsub()
    found: list[float] = []
    try:
        await pubsub.subscribe("rfbench-gates:floor")
        await pubsub.get_message(timeout=1.0)  # the confirmation
        for _ in range(samples):
            start = time.perf_counter()
            await sender.publish("rfbench-gates:floor", b"1")
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None:
                    break
            found.append(time.perf_counter() - start)
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await sender.aclose()
        await listener.aclose()
    return found


async def _hand_over(ctx: Context, storage: rf.RedisStorage, url: str) -> None:
    """One holder keeps the lock until a waiter is subscribed; then its step returns. The
    hand-over is measured from the moment the holder sends its final save (which releases the
    lock) to the waiter's step, as the floor is measured from the moment PUBLISH is sent: the
    mark does not depend on when the holder's own reply is read."""
    report = ctx.report
    flow = rf.Reactor(f"bench.gates.handover.{uuid.uuid4().hex[:6]}", inputs=Account,
                      gates=[rf.Lock("handover:{account_id}", wait=30)])
    gate: dict[str, Any] = {}
    released: list[float] = []
    taken: list[float] = []
    original = storage.save_state
    original_take = scope.take_place

    async def timed_take(*args: Any, **kwargs: Any) -> Any:
        took = await original_take(*args, **kwargs)
        taken.append(time.perf_counter())
        return took

    async def timed_release(run_id: str, owner: str, **kwargs: Any) -> bytes | None:
        if kwargs.get("gates"):  # the holder's final save, sent now: its lock is released with it
            released.append(time.perf_counter())
        return await original(run_id, owner, **kwargs)

    storage.save_state = timed_release  # type: ignore[method-assign]
    scope.take_place = timed_take  # type: ignore[assignment]

    @flow.step
    async def work(account_id: str) -> float:
        started = time.perf_counter()
        hold = gate.get("hold")
        if hold is not None:
            gate["hold"] = None
            await hold.wait()
        return started

    samples = ctx.pick(full=100, quick=15)
    found: list[float] = []
    woken: list[float] = []
    try:
        for _ in range(samples):
            hold = anyio.Event()
            gate["hold"] = hold
            released.clear()
            results: list[rf.Run] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: flow.run(account_id="k"))
                while gate.get("hold") is not None:  # until the holder's step runs
                    await anyio.sleep(0.001)

                async def waiter(into: list[rf.Run]) -> None:
                    into.append(await flow.run(account_id="k"))

                tg.start_soon(waiter, results)
                await anyio.sleep(0.05)  # the waiter subscribed and found the lock busy
                taken.clear()
                hold.set()
            assert results and released and taken
            found.append(results[0].value - released[0])
            woken.append(taken[0] - released[0])
    finally:
        storage.save_state = original  # type: ignore[method-assign]
        scope.take_place = original_take  # type: ignore[assignment]
    floor = await _pubsub_floor(url, samples * 4)
    write = await _redis.scripted_write_latencies(storage, "rfbench-gates:write", samples * 4)
    us = 1e6
    report.distribution("reactorflow: gate hand-over", [found], group="gate hand-over")
    report.distribution("baseline: pub/sub floor", [floor], group="gate hand-over")
    p50, floor50 = percentile(found, 50), percentile(floor, 50)
    write50 = percentile(write, 50)
    floor2 = write50 + floor50  # the save (one scripted write) plus the notification
    report.row("hand-over: release sent -> next caller's step, p50", p50 * us, "µs",
               f"p90 {percentile(found, 90) * us:.0f} µs ({samples} hand-overs)")
    report.row("  of which: release -> the waiter holds the place and its run, p50",
               percentile(woken, 50) * us, "µs",
               f"{percentile(woken, 50) / floor2:.1f}x the floor (handed over by the release)")
    report.row("baseline: one scripted write (EVALSHA, 1 key), p50", write50 * us, "µs",
               f"p90 {percentile(write, 90) * us:.0f} µs (the run scripts' connection)")
    report.row("baseline: pub/sub (PUBLISH -> message read), p50", floor50 * us, "µs",
               f"p90 {percentile(floor, 90) * us:.0f} µs")
    report.row("floor: scripted write + pub/sub, p50s summed", floor2 * us, "µs")
    report.row("ratio p50 / floor", p50 / floor2, "x",
               f"{p50 / floor50:.1f}x the pub/sub floor alone (last round's)")
    report.verdict("hand-over p50 <= 2x the floor (scripted write + pub/sub)", p50 <= 2 * floor2,
                   f"{p50 * us:.0f} µs vs {floor2 * us:.0f} µs "
                   f"({write50 * us:.0f} + {floor50 * us:.0f}) = {p50 / floor2:.1f}x")


async def _rate(ctx: Context, storage: rf.RedisStorage) -> None:
    """50 callers, each charging one call after another (waiting for the window when refused),
    through the same path a run's rate limit takes (`gates.waiting.charge`)."""
    report = ctx.report
    key = f"bench-rate-{uuid.uuid4().hex[:6]}"
    limit, callers = 1000, 50
    seconds = ctx.pick(full=5, quick=2)
    admitted: list[float] = []
    start = time.time()
    # Whole seconds only, from the second one: the limiter counts by the server's windows,
    # this by the moment each caller reads its reply. In the partial second the callers start
    # in, the window may still be admitting at its very end (it has not filled yet), and the
    # replies read after the boundary would count in the next second. From then on every
    # window fills early in its second and the two clocks agree.
    first_full = int(start) + 2
    end = first_full + seconds

    async def caller() -> None:
        while time.time() < end:
            if await charge(storage, key, [(1, limit)], uuid.uuid4().hex, wait=5.0) is None:
                admitted.append(time.time())

    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller)
    per_second = [sum(1 for t in admitted if s <= t < s + 1)
                  for s in range(first_full, end)]
    mean = sum(per_second) / len(per_second)
    report.row(f"rate limiter: admitted per second ({callers} callers, second={limit})",
               Spread.of([float(n) for n in per_second]), "calls/s",
               f"per whole second: {per_second}")
    report.row("baseline: the limit", float(limit), "calls/s")
    within = abs(mean - limit) <= 0.05 * limit
    never_above = max(per_second) <= limit
    report.verdict("within 5% of the limit, never above it", within and never_above,
                   f"mean {mean:.0f}/s ({(mean - limit) / limit:+.1%}), max "
                   f"{max(per_second)}/s (seconds by this machine's clock)")


async def run(ctx: Context) -> None:
    server = ctx.redis()
    storage = ctx.redis_storage("gates")
    rf.configure(storage=storage)
    ctx.report.note(f"{ctx.reps} repetitions for the lock timing; hand-over and rate limiter "
                    "sampled once each")
    await _uncontended(ctx, server.url)
    await _hand_over(ctx, storage, server.url)
    await _rate(ctx, storage)
