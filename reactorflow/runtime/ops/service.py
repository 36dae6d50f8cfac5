"""The runtime behind `Reactor`'s run methods, bound by the `reactorflow` package at import
(`definition.runs.bind`): the declaration layer never imports the runtime."""

from __future__ import annotations

from reactorflow.runtime.ops import (
    migrating,
    operations,
    pausing,
    repair,
    resume,
    retrying,
    rewind,
)


class RuntimeService:
    """`definition.runs.Runtime`, implemented by the runtime's operations."""

    start = staticmethod(operations.start)
    get = staticmethod(operations.get)
    wait = staticmethod(operations.wait)
    undo = staticmethod(operations.undo)
    cancel = staticmethod(operations.cancel)
    list_runs = staticmethod(operations.list_runs)
    retry = staticmethod(retrying.retry)
    migrate = staticmethod(migrating.migrate)
    retry_step = staticmethod(repair.retry_step)
    skip_step = staticmethod(repair.skip_step)
    rewind = staticmethod(rewind.rewind)
    continue_run = staticmethod(resume.continue_run)
    continue_by_correlation = staticmethod(resume.continue_by_correlation)
    pause = staticmethod(pausing.pause)
    resume = staticmethod(pausing.resume)  # (last: the name `resume` is the module above)


RUNTIME = RuntimeService()
