"""One client process of the `capacity` benchmark: `python -m benchmarks._capacity_client URL
NAMESPACE CONCURRENCY`.

It runs a 3-step saga in-process (`await flow.run()`) on `RedisStorage(URL)`, as `CONCURRENCY`
concurrent loops in one event loop. The benchmark drives it over stdin/stdout, one msgspec JSON
message a line: the client warms up and writes `Ready`; the benchmark writes `Go` (the seconds
to run) to every client at once, once all are ready; each runs that long and writes `Done`
(runs completed, its own CPU seconds and the wall seconds it ran), then waits for the next
`Go`, until its stdin ends.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import msgspec

import reactorflow as rf
from benchmarks import _flows

STEPS = 3
WARM_RUNS = 20


class Ready(msgspec.Struct, tag=True):
    pid: int


class Go(msgspec.Struct, tag=True):
    seconds: float


class Done(msgspec.Struct, tag=True):
    runs: int
    cpu: float
    wall: float


Message = Ready | Go | Done
encode = msgspec.json.Encoder().encode
decode = msgspec.json.Decoder(Message).decode


async def _loop(flow: rf.Reactor, deadline: float) -> int:
    done = 0
    while time.perf_counter() < deadline:
        result = await flow.run()
        if result.status is not rf.Status.COMPLETED:
            raise RuntimeError(f"a saga run ended {result.status}: {result.error}")
        done += 1
    return done


async def main(url: str, namespace: str, concurrency: int) -> None:
    storage = rf.RedisStorage.from_url(url, namespace=namespace, retention=3600)
    rf.configure(storage=storage)
    flow = _flows.saga("capacity.saga", STEPS)
    try:
        for _ in range(WARM_RUNS):
            await flow.run()
        sys.stdout.buffer.write(encode(Ready(pid=os.getpid())) + b"\n")
        sys.stdout.flush()
        while line := await asyncio.to_thread(sys.stdin.buffer.readline):  # until EOF
            go = decode(line)
            if not isinstance(go, Go):
                raise RuntimeError(f"expected Go, got {go!r}")
            cpu, began = time.process_time(), time.perf_counter()
            deadline = began + go.seconds
            counts = await asyncio.gather(*(_loop(flow, deadline) for _ in range(concurrency)))
            wall, cpu = time.perf_counter() - began, time.process_time() - cpu
            sys.stdout.buffer.write(encode(Done(runs=sum(counts), cpu=cpu, wall=wall)) + b"\n")
            sys.stdout.flush()
    finally:
        await storage.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
