"""The error of the sync facade (`reactor.sync.run`, `rf.sync.get_run`, ...)."""

from __future__ import annotations

from reactorflow.errors.core import ReactorflowError


class SyncInEventLoop(ReactorflowError):
    """A method of the sync facade was called inside a running event loop.

    The `.sync` methods block their thread until the work is done; inside an event loop that
    would stop every other task of the loop, so they refuse, naming the async method to await
    instead. Nothing was started or changed.

    Attributes:
        called: The sync method called (`'sync.run'` for a reactor's, `'rf.sync.get_run'`).
        instead: The async method to await instead (`'run'` for a reactor's, `'rf.get_run'`).
        reactor: The reactor whose `.sync` method was called, or `None` (`rf.sync`).
    """

    def __init__(self, called: str, instead: str, *, reactor: str | None = None) -> None:
        if reactor is None:
            what, awaited = f"{called}()", f"await {instead}(...)"
        else:
            what = f"reactor {reactor!r}: `reactor.{called}()`"
            awaited = f"await reactor.{instead}(...)"
        super().__init__(
            f"{what} was called inside a running event loop; it blocks its thread until the "
            f"work is done, which would stall every other task of the loop. In async code "
            f"await the async method instead: `{awaited}`; the `.sync` methods are for sync "
            "code (a Flask or Django view, a management command, a Celery task).")
        self.called = called
        self.instead = instead
        self.reactor = reactor
