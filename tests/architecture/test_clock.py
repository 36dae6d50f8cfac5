"""Every engine read of time and every engine wait goes through the clock seam
(`reactorflow/clock.py`), so the test kit's fake clock drives retry backoff, snoozes, timeouts,
lock TTLs, stall detection and wait deadlines. Checked on the source: a direct read of the
system clocks or a direct timer anywhere else fails this test, unless the place is listed below
with the reason it needs real time."""

from __future__ import annotations

import re
from pathlib import Path

import reactorflow

PACKAGE = Path(reactorflow.__file__).resolve().parent

FORBIDDEN = {
    "time.time(": re.compile(r"\btime\.time\("),
    "time.monotonic(": re.compile(r"\btime\.monotonic\("),
    "time.perf_counter(": re.compile(r"\btime\.perf_counter\("),
    "datetime.now(": re.compile(r"\bdatetime\.(now|utcnow)\("),
    "anyio.sleep(": re.compile(r"\banyio\.sleep\("),
    "asyncio.sleep(": re.compile(r"\basyncio\.sleep\("),
    "move_on_after(": re.compile(r"(?<!clock\.)(?<!def )\bmove_on_after\("),
    "fail_after(": re.compile(r"\bfail_after\("),
    "asyncio.wait_for(": re.compile(r"\bwait_for\("),
    "loop.time(": re.compile(r"\bloop\.time\("),
    "from time/anyio/asyncio import": re.compile(
        r"^\s*from (time|anyio|asyncio) import .*\b(time|monotonic|sleep|move_on_after|"
        r"fail_after|wait_for)\b", re.M),
}

# path (relative to the package) -> (patterns it may use, why it needs real time)
ALLOWED: dict[str, tuple[set[str], str]] = {
    "clock.py": ({"anyio.sleep(", "move_on_after("},
                 "the seam itself: the real clock"),
    "runtime/engine/lockkeeper.py": ({"time.monotonic(", "asyncio.wait_for("},
                              "the keeper's own thread keeps this process's locks alive in "
                              "real time; a fake clock extends live holds itself when it jumps"),
    "runtime/services/loop_thread.py": ({"move_on_after("},
                                        "a process's background loops (the timer firer, the "
                                        "worker heartbeat) wait in real time on their own "
                                        "thread; under a fake clock `clock.advance` fires the "
                                        "timers, and peers see heartbeats in real time"),
    "storage/memory/storage.py": ({"asyncio.wait_for("},
                          "a subscription's wait is given real seconds (clock.wait_signal "
                          "bounds it in clock time)"),
    "storage/redis/pubsub.py": ({"move_on_after(", "loop.time("},
                                "network I/O timeouts of the Redis pub/sub connection"),
    "storage/redis/connections.py": ({"asyncio.wait_for("},
                              "the connection pool's wait for a free connection (pool_timeout): "
                              "a network-I/O timeout in real seconds, like redis-py's own"),
    "storage/redis/wire.py": ({"loop.time("},
                              "the wire connection's socket timeout: a network-I/O timeout in "
                              "real seconds, like redis-py's own"),
    "workers/health.py": ({"time.monotonic("},
                          "a worker process's backoff on a lost broker: network I/O in "
                          "Dramatiq's consumer threads, in real seconds"),
    "web/events.py": ({"time.monotonic(", "anyio.sleep("},
                      "the HTTP event stream's keep-alive and polling are wall-clock matters"),
    "demo.py": ({"anyio.sleep("}, "the demo's steps simulate work (user code, not the engine)"),
    "testing/clock.py": ({"time.time("}, "the fake clock starts at the real time"),
    "testing/queue.py": ({"time.monotonic(", "asyncio.sleep("},
                         "drain's stuck check gives jobs waiting for the fake clock a grace in "
                         "real time (the fake time stands still while it looks)"),
    "testing/redis_server.py": ({"time.monotonic("}, "waiting for a redis-server process to "
                                                     "start is a wall-clock matter"),
}


def _uses(path: Path) -> set[str]:
    text = path.read_text()
    return {name for name, pattern in FORBIDDEN.items() if pattern.search(text)}


def test_no_engine_time_outside_the_clock_seam() -> None:
    stray = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        allowed = ALLOWED.get(relative, (set(), ""))[0]
        found = _uses(path) - allowed
        if found:
            stray[relative] = sorted(found)
    assert stray == {}, ("read time and wait through reactorflow.clock (now, monotonic, sleep, "
                         "move_on_after, wait_signal), or list the place in ALLOWED with the "
                         "reason it needs real time")


def test_the_allow_list_is_not_stale() -> None:
    """Each allowance is still used (a place that stopped needing real time leaves the list)."""
    for relative, (allowed, _reason) in ALLOWED.items():
        assert allowed <= _uses(PACKAGE / relative), relative


def test_the_checker_sees_a_stray_read(tmp_path: Path) -> None:
    module = tmp_path / "stray.py"
    module.write_text("import time, anyio\nasync def f():\n    t = time.time()\n"
                      "    await anyio.sleep(1)\n    with anyio.move_on_after(2): pass\n")
    assert _uses(module) == {"time.time(", "anyio.sleep(", "move_on_after("}
