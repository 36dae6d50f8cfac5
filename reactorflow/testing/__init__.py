"""`rf.testing`: a test kit for reactorflow workflows.

`Environment` (an async context manager, usable in any test framework) gives one test fresh
storage, a fake clock (`env.clock.advance(...)`), an in-test job queue (`env.drain()`), step
overrides (`env.override(...)`), crash injection (`env.crash(...)`, `env.crash_tick(...)`,
`env.recover()`) and
readable history assertions (`executed`, `undone`). The pytest plugin
(`reactorflow.testing.plugin`, registered as the `pytest11` entry point `reactorflow`) wraps it
in the `rf_env` and `rf_redis_env` fixtures; it has no autouse fixtures.

Importing this package changes nothing and needs no pytest.
"""

from reactorflow.testing.clock import FakeClock
from reactorflow.testing.crash import CrashPoint, SimulatedCrash, SimulatedTickCrash
from reactorflow.testing.environment import CrashNotReached, Environment
from reactorflow.testing.history import events, executed, undone
from reactorflow.testing.queue import DrainError, DrainStuck

__all__ = [
    "CrashNotReached",
    "CrashPoint",
    "DrainError",
    "DrainStuck",
    "Environment",
    "FakeClock",
    "SimulatedCrash",
    "SimulatedTickCrash",
    "events",
    "executed",
    "undone",
]
