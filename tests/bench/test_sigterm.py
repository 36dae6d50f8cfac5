"""A benchmark run ended by SIGTERM (a CI job's timeout, `kill`) stops the private
redis-server it started, exits 143 saying so, and writes no results (the default action left the
server running, orphaned)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _children(pid: int) -> list[tuple[int, str]]:
    """The live child processes of `pid` (pid, command line), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append((int(entry.name), command))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads child processes from /proc")
def test_sigterm_stops_the_private_redis_server_and_writes_no_results(tmp_path: Path) -> None:
    latest = tmp_path / "latest.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("REACTORFLOW_BENCH_REDIS_URL", None)  # (a private server, started by the run)
    bench = subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "codec_cost", "--reps", "200", "--json",
         str(latest), "--no-history"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        servers: list[int] = []
        while not servers and time.monotonic() < deadline and bench.poll() is None:
            servers = [pid for pid, command in _children(bench.pid) if "redis-server" in command]
            time.sleep(0.05)
        assert servers, "the benchmark started no redis-server of its own"
        time.sleep(0.5)  # (well into its repetitions)
        bench.send_signal(signal.SIGTERM)
        _, err = bench.communicate(timeout=60)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
    assert bench.returncode == 143, err
    assert "SIGTERM: the run stopped before its end, and no results were written" in err
    assert not [pid for pid in servers if _alive(pid)], "the redis-server was left running"
    assert not latest.exists()
