"""The facade's event-loop thread across a process's life: started afresh in a forked child (a
Celery prefork or gunicorn worker), and stopped at interpreter exit (the process ends by
itself, with the loop's thread gone before the last exit handlers run)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD = 60  # seconds: a child that hangs (a call into a portal that does not exist) fails

PRELUDE = f"""
import os, signal, sys, threading
HANG_GUARD = {HANG_GUARD}
import reactorflow as rf

flow = rf.Reactor("sync-process")

@flow.step
async def who() -> int:
    return os.getpid()

def portal_threads():
    return [t.name for t in threading.enumerate() if t.name == "reactorflow-sync" and t.is_alive()]
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ,
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                               os.environ.get("PYTHONPATH")]))}
    environment.pop("REACTORFLOW_REDIS_URL", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=HANG_GUARD,
                          check=False)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_starts_its_own_event_loop_thread() -> None:
    done = _python(PRELUDE + """
parent = flow.sync.run()                     # the parent's portal is running now
assert parent.value == os.getpid() and portal_threads() == ["reactorflow-sync"]
pid = os.fork()
if pid == 0:                                 # the child: the parent's loop thread is not here
    signal.alarm(HANG_GUARD)                 # a hung child ends (SIGALRM) instead of lingering
    try:
        assert portal_threads() == [], portal_threads()
        child = flow.sync.run()
        assert child.value == os.getpid() != parent.value, (child.value, parent.value)
        assert rf.sync.get_run(child.id).id == child.id
        assert portal_threads() == ["reactorflow-sync"]
    except BaseException as exc:
        print("child:", repr(exc), file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert flow.sync.get(parent.id).value == parent.value     # the parent's portal still serves
print("ok")
""")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_event_loop_thread_stops_at_interpreter_exit() -> None:
    """A thread still blocked in a sync call (its run's step never returns) does not hold the
    exit up: the loop is stopped, the call in flight cancelled (its run is cut off, to be
    recovered by the sweeper), and the thread joined before the exit handlers registered
    earlier run."""
    done = _python("""
import atexit
def after_reactorflow():                     # registered first, so it runs after rf's handler
    alive = [t.name for t in threading.enumerate() if t.name == "reactorflow-sync"]
    print("portal threads at the end:", alive, flush=True)
atexit.register(after_reactorflow)
""" + PRELUDE + """
import anyio
entered = threading.Event()
stuck = rf.Reactor("sync-stuck")

@stuck.step
async def forever() -> None:
    entered.set()
    await anyio.sleep_forever()

print(flow.sync.run().status.value, flush=True)
threading.Thread(target=stuck.sync.run, daemon=True).start()
entered.wait()
""")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["completed", "portal threads at the end: []"]
    assert "reactorflow.run.aborted" in done.stderr and "cut_off=forever" in done.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_does_not_inherit_the_lock_keeper() -> None:
    """The runtime's other process-wide thread, the lock keeper, is forgotten in a child too:
    forked while a run of the parent holds its lock and while the keeper's mutex is held (as
    its thread holds it every wake-up), the child keeps none of the parent's holds and runs
    its own runs."""
    done = _python(PRELUDE + """
import anyio
from reactorflow.runtime.engine.lockkeeper import keeper

entered, release = threading.Event(), threading.Event()
slow = rf.Reactor("sync-slow-parent")

@slow.step
async def hold_on() -> int:
    entered.set()
    await anyio.to_thread.run_sync(release.wait)
    return os.getpid()

parent_run = threading.Thread(target=slow.sync.run)
parent_run.start()
entered.wait()
assert keeper.held() == 1                    # the parent's run holds its lock
locked, unlock = threading.Event(), threading.Event()

def holding_the_mutex():                     # as the keeper's thread holds it every wake-up
    with keeper._mutex:
        locked.set()
        unlock.wait()

holder = threading.Thread(target=holding_the_mutex)
holder.start()
locked.wait()
pid = os.fork()                              # the child has the mutex held, not its holder
if pid == 0:
    signal.alarm(HANG_GUARD)
    try:
        assert keeper.held() == 0, keeper.held()
        assert flow.sync.run().value == os.getpid()
    except BaseException as exc:
        print("child:", repr(exc), file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(0)
unlock.set()
holder.join()
_, status = os.waitpid(pid, 0)
release.set()
parent_run.join()
assert os.waitstatus_to_exitcode(status) == 0, status
print("ok")
""")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
