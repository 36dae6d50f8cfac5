"""The gate primitives of `RedisStorage` (the contract: `storage/contract/gates.py`).

Every operation is one Lua script (one file each in `scripts/`, with its KEYS/ARGV header) over
the keys of one gate, which share the hash tag `{g:<digest of the gate key>}` (one Redis
Cluster slot per gate; any text is a safe key). Times come from the server's clock (`TIME`), so
every process sees the same windows and expiries. Key layout (also in
docs/reference/redis-keys.md):

* `<ns>:gate:{g:<d>}:holders` — sorted set, holder -> expiry (ms): locks and semaphores;
* `<ns>:gate:{g:<d>}:queue`, `:asks` — the holders queued for a place (sorted set, by the ms
  they joined) and what each asks for (hash: "<deadline ms> <ttl ms> <limit>");
* `<ns>:gate:{g:<d>}:runs` — the run each queued holder asks to create on hand-over (hash:
  holder -> msgpack `[keys, args]` of `create_run.lua`; `+` once a release created it, until
  its holder is told or releases the gate). One node only: the release creates the run in
  the run's own keys, which a Redis Cluster keeps in other slots (there the queue carries no
  run, and the waiter creates its run after the hand-over);
* `<ns>:gate:{g:<d>}:rate`, `:charges` — rate-limit windows (hash) and admitted charges (zset);
* `<ns>:gate:{g:<d>}:period` — a period marker (the key includes the bucket);
* `<ns>:gate:{g:<d>}:line`, `:tickets`, `:stamps`, `:done` — an ordered lock's line (no TTL:
  kept while a ticket is in it, deleted once every place is finished);
* channel `<ns>:gate:{g:<d>}` — notified when a place frees: the name of the queued holder it
  was handed to (followed by `\0+` when its run was created), or `1`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis.asyncio.client import Pipeline

from reactorflow import clock
from reactorflow.storage.contract.values import GateTake, OrderedLine, RunCreation, Subscription
from reactorflow.storage.redis.connections import SOURCES, RedisConnector
from reactorflow.storage.redis.retry_tokens import token

CHARGE_MEMORY = 86_400.0
"""Seconds a rate-limit charge is remembered at least (twice the longest window if longer)
after it was last asked for (a run asks again each time it tries its gates)."""


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _pack(lists: list[list[bytes]]) -> bytes:
    """Lists of byte strings in msgpack with the formats Redis's `cmsgpack` reads (strings as
    raw: fixraw/raw16/raw32, never bin or str8, which it refuses), each string verbatim."""
    out = bytearray(_array(len(lists)))
    for items in lists:
        out += _array(len(items))
        for item in items:
            out += _raw(len(item))
            out += item
    return bytes(out)


def _array(n: int) -> bytes:
    return bytes([0x90 | n]) if n < 16 else (
        b"\xdc" + n.to_bytes(2) if n < 65536 else b"\xdd" + n.to_bytes(4))


def _raw(n: int) -> bytes:
    return bytes([0xa0 | n]) if n < 32 else (
        b"\xda" + n.to_bytes(2) if n < 65536 else b"\xdb" + n.to_bytes(4))


class RedisGates:
    """Gate holders, rate windows, period markers and ordered-lock lines, in Redis."""

    _redis: RedisConnector
    _keys: Any  # RedisKeys
    _retention_ms: int
    history_limit: int
    _remember: Any  # (run id, reactor, created_at) -> None: RedisStorage's facts of a run

    def _gate(self, key: str, part: str = "") -> str:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        base = f"{self._keys.ns}:gate:{{g:{digest}}}"
        return f"{base}:{part}" if part else base

    def _holder_keys(self, key: str) -> list[str]:
        base = self._gate(key)  # one digest for the four
        return [f"{base}:{part}" for part in ("holders", "queue", "asks", "runs")]

    def _line_keys(self, key: str) -> list[str]:
        base = self._gate(key)
        return [f"{base}:{part}" for part in ("line", "tickets", "stamps", "done")]

    async def _run(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        conn = await self._redis.get()
        with self._redis.errors():
            return await conn.script(script, keys, args)

    def subscribe_gate(self, key: str) -> AbstractAsyncContextManager[Subscription]:
        return self._redis.subscription(self._gate(key))

    # -- holders -------------------------------------------------------------------------------

    async def gate_acquire(self, key: str, holder: str, *, limit: int, ttl: float,
                           queue_for: float = 0.0, creates: RunCreation | None = None,
                           ) -> GateTake:
        run = b""
        if creates is not None and queue_for > 0 and not (await self._redis.get()).cluster:
            run = self._creation(creates)
        verdict = await self._run("gate_acquire", self._holder_keys(key),
                                  [holder, limit, _ms(ttl), _ms(queue_for) if queue_for > 0 else 0,
                                   run])
        text = verdict.decode() if isinstance(verdict, bytes) else str(verdict)
        return GateTake(text)

    def _creation(self, run: RunCreation) -> bytes:
        """`run` as `create_run.lua` takes it (its keys, the indexes included, and its
        arguments), packed for `gate_release` to create it; the run's facts are remembered
        now, so that its first save costs one round trip whoever created it."""
        keys = self._keys
        run_keys = [*keys.run_keys(run.run_id), keys.by_reactor(run.reactor),
                    keys.by_status(run.reactor, run.status), keys.reactors()]
        texts = [token(), run.reactor, run.status]
        claim = ("" if run.idempotency_key is None
                 else keys.idempotency(run.reactor, run.idempotency_key))
        numbers = [repr(run.created_at), repr(clock.now()), run.owner, str(_ms(run.lock_ttl)),
                   str(self._retention_ms), str(self.history_limit), run.run_id, claim]
        args = [*(t.encode() for t in texts), run.meta, run.state,
                *(n.encode("utf-8", "surrogatepass") for n in numbers), *run.events]
        self._remember(run.run_id, run.reactor, run.created_at)
        return _pack([[k.encode("utf-8", "surrogatepass") for k in run_keys], args])

    async def gate_withdraw(self, key: str, holder: str) -> GateTake:
        left = int(await self._run("gate_withdraw", self._holder_keys(key), [holder]))
        return (GateTake.BUSY, GateTake.HELD, GateTake.CREATED)[left]

    async def gate_release(self, key: str, holder: str) -> bool:
        released = await self._run("gate_release", self._holder_keys(key),
                                   [holder, self._gate(key)])
        return bool(released == 1)

    def _queue_gate_releases(self, pipe: Pipeline, gates: Sequence[tuple[str, str]]) -> None:
        """Queue `gate_release` of each (key, holder) on a pipeline (by source: EVAL never
        meets NOSCRIPT, and a cluster pipeline takes no EVALSHA)."""
        for key, holder in gates:
            pipe.eval(SOURCES["gate_release"], 4, *self._holder_keys(key), holder,
                      self._gate(key))

    def _release_parts(self, gates: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
        """The keys and the (holder, channel) arguments of each (key, holder) of `gates`, as
        `save_release.lua` takes them after the save's own (one node only)."""
        keys: list[str] = []
        args: list[str] = []
        for key, holder in gates:
            keys += self._holder_keys(key)
            args += [holder, self._gate(key)]
        return keys, args

    async def gate_extend(self, key: str, holder: str, ttl: float) -> bool:
        kept = await self._run("gate_extend", self._holder_keys(key)[:1], [holder, _ms(ttl)])
        return bool(kept == 1)

    async def gate_holders(self, key: str) -> list[str]:
        conn = await self._redis.get()
        with self._redis.errors():
            t = await conn.client.time()
            now = t[0] * 1000 + t[1] // 1000
            found = await conn.client.zrangebyscore(self._gate(key, "holders"), now + 1, "+inf")
        return [h.decode() if isinstance(h, bytes) else str(h) for h in found]

    # -- rate limits and periods ---------------------------------------------------------------

    async def rate_charge(self, key: str, windows: Sequence[tuple[int, int]], charge: str,
                          ) -> float | None:
        memory = max(CHARGE_MEMORY, 2.0 * max(seconds for seconds, _ in windows))
        args: list[Any] = [charge, _ms(memory)]
        for seconds, limit in windows:
            args += [seconds, limit]
        wait = int(await self._run("rate_charge", [self._gate(key, "rate"),
                                                   self._gate(key, "charges")], args))
        return None if wait < 0 else wait / 1000

    async def period_marked(self, key: str) -> bool:
        conn = await self._redis.get()
        with self._redis.errors():
            return bool(await conn.client.exists(self._gate(key, "period")))

    async def mark_period(self, key: str, ttl: float) -> bool:
        conn = await self._redis.get()
        with self._redis.errors():
            return bool(await conn.client.set(self._gate(key, "period"), b"1", nx=True,
                                              px=_ms(ttl)))

    # -- ordered locks -------------------------------------------------------------------------

    async def ordered_enter(self, key: str, ticket: str) -> int:
        return int(await self._run("ordered_enter", self._line_keys(key), [ticket]))

    async def ordered_turn(self, key: str, ticket: str, poison_pill_timeout: float) -> bool | None:
        verdict = int(await self._run("ordered_turn", self._line_keys(key),
                                      [ticket, _ms(poison_pill_timeout)]))
        return None if verdict < 0 else verdict == 1

    async def ordered_stamp(self, key: str, ticket: str) -> bool:
        return bool(await self._run("ordered_stamp", self._line_keys(key), [ticket]) == 1)

    async def ordered_leave(self, key: str, ticket: str) -> bool:
        left = await self._run("ordered_leave", self._line_keys(key), [ticket, self._gate(key)])
        return bool(left == 1)

    async def ordered_pass(self, key: str, ticket: str, quiet_for: float) -> bool:
        passed = await self._run("ordered_pass", self._line_keys(key),
                                 [ticket, _ms(quiet_for), self._gate(key)])
        return bool(passed == 1)

    async def ordered_peek(self, key: str, ticket: str | None = None) -> OrderedLine:
        turn, stamp, waiting, ahead = await self._run("ordered_peek", self._line_keys(key),
                                                      [ticket or ""])
        head = turn.decode() if isinstance(turn, bytes) else str(turn)
        if not head:
            return OrderedLine(key)
        return OrderedLine(key, head, int(stamp) / 1000 if int(stamp) >= 0 else None,
                           int(waiting), int(ahead) if int(ahead) >= 0 else None)

    async def ordered_reset(self, key: str) -> int:
        return int(await self._run("ordered_reset", self._line_keys(key), [self._gate(key)]))
