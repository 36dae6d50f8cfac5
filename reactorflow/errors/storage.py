"""Errors raised when the storage backend fails."""

from __future__ import annotations

import re

from reactorflow.errors.core import ReactorflowError


class StorageError(ReactorflowError):
    """The storage backend failed.

    Attributes:
        transient: Whether the same call may succeed later with nobody changing anything: the
            server unreachable, still loading, failing over, full, a pool busy (True, the
            default; the HTTP API answers 503). False for a failure that stays until someone
            acts: a reply refusing the command for good (a missing permission, a key of
            another type, a wrong URL kind), a record that cannot be decoded (the HTTP API
            answers 500). A subclass declares its own.
    """

    transient: bool = True


class StorageConnectionError(StorageError):
    """The storage server could not be reached (the URL is named, never its credentials).

    Raised while starting a run, it says whether that run was stored: `run_id` is the id the
    run has (or would have had), and `stored` is True (it is stored: the sweeper finishes it
    once storage is back; do not start it again), False (nothing of it was stored) or None (the
    store was sent but its answer was lost: `get(run_id)` tells once storage is back).

    Attributes:
        url: The storage URL (without credentials).
        reason: Why it could not be reached.
        stored: Whether the run being started was stored (see above), or `None`.
    """

    def __init__(self, url: str, reason: str, *, cause: BaseException | None = None,
                 run_id: str | None = None, stored: bool | None = None) -> None:
        message = (f"cannot reach storage at {url}: {reason.rstrip('. ')}. Check that the server "
                   "is running and the URL is right.")
        if run_id is not None:
            message += " " + _stored_note(run_id, stored)
        super().__init__(message, run_id=run_id, cause=cause)
        self.url = url
        self.reason = reason
        self.stored = stored

    def starting(self, run_id: str, *, stored: bool | None) -> StorageConnectionError:
        """This error, raised while starting run `run_id`: says whether the run was stored.

        Args:
            run_id: The run being started.
            stored: Whether it was stored (`None`: unknown, the answer was lost).
        """
        return StorageConnectionError(self.url, self.reason, cause=self.cause or self,
                                      run_id=run_id, stored=stored)


def _stored_note(run_id: str, stored: bool | None) -> str:
    if stored:
        return (f"Run {run_id!r} was stored: it goes on (the sweeper finishes it) once storage "
                f"is reachable. Do not start it again; follow it with wait({run_id!r}).")
    if stored is None:
        return (f"Run {run_id!r} may or may not have been stored (the answer was lost): "
                f"get({run_id!r}) tells once storage is reachable; if it exists the sweeper "
                "finishes it, so start it again only if it does not.")
    return f"Run {run_id!r} was not stored: starting it again is safe."


class StorageNotReady(StorageConnectionError):
    """The storage server is reachable but refused to serve a command for now, still after the
    retries: it is loading its data after a restart (`LOADING`), busy with a long script
    (`BUSY`), or failing over (`TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`). Nothing was written by
    the refused command. A `StorageConnectionError`: callers treat it as an outage.

    Attributes:
        url: The storage URL (without credentials).
        reply: The server's error reply, code first (e.g. `LOADING Redis is loading the
            dataset in memory`).
        command: The command or script refused (e.g. `save_step`), or `None`.
    """

    def __init__(self, url: str, reply: str, command: str | None, *,
                 cause: BaseException | None = None, run_id: str | None = None,
                 stored: bool | None = None) -> None:
        message = (f"storage at {url} is not serving yet: it answered {reply!r} to "
                   f"{command or 'a command'}, still after the retries (loading its data "
                   "after a restart, busy with a long script, or failing over). Nothing was "
                   "written by that command; try again once the server serves.")
        if run_id is not None:
            message += " " + _stored_note(run_id, stored)
        StorageError.__init__(self, message, run_id=run_id, cause=cause)
        self.url = url
        self.reason = reply
        self.reply = reply
        self.command = command
        self.stored = stored

    def starting(self, run_id: str, *, stored: bool | None) -> StorageNotReady:
        """This error, raised while starting run `run_id`: says whether the run was stored.

        Args:
            run_id: The run being started.
            stored: Whether it was stored (`None`: unknown, the answer was lost).
        """
        return StorageNotReady(self.url, self.reply, self.command, cause=self.cause or self,
                               run_id=run_id, stored=stored)


class StorageReplyError(StorageError):
    """The storage server refused a command with an error reply (never read as data): a
    command it rejects, a full memory (`OOM`), a read-only replica (`READONLY`), missing
    permissions (`NOPERM`), a key of another type (`WRONGTYPE`), a cluster node addressed as
    a single server (`MOVED`, `ASK`) ...

    Attributes:
        url: The storage URL (without credentials).
        reply: The server's error reply, code first (e.g. `OOM command not allowed ...`).
        command: The command or script refused (e.g. `save_step`), or `None`.
    """

    def __init__(self, url: str, reply: str, command: str | None, *,
                 cause: BaseException | None = None) -> None:
        code = reply_code(reply)
        hint = REPLY_HINTS.get(code, "")
        super().__init__(f"Redis at {url} refused {command or 'a command'}: {reply}"
                         + (f" ({hint})" if hint else ""), cause=cause)
        self.url = url
        self.reply = reply
        self.command = command
        self.transient = code in TRANSIENT_REPLIES


def reply_code(reply: str) -> str:
    """The code of an error reply (`OOM` of `OOM command not allowed ...`). Redis before 7
    wraps an error raised inside a script in its own (`ERR Error running script (call to ...):
    @user_script:255: -OOM command not allowed ...`): the code is then the inner one."""
    code = reply.split(" ", 1)[0]
    if code == "ERR" and reply.startswith("ERR Error running script"):
        inner = re.search(r": -([A-Z]+) ", reply)
        if inner is not None:
            return inner.group(1)
    return code


TRANSIENT_REPLIES = frozenset({"OOM", "READONLY"})
"""The error reply codes that may clear by themselves (`StorageError.transient`): a full
memory (ended runs expire, memory is freed) and a replica that was the primary (a failover
under way: the client finds the new primary). Every other reply (`NOPERM`, `WRONGTYPE`, `MOVED`
to a single-server URL, `NOAUTH`, an unknown command ...) stays until someone acts."""


REPLY_HINTS = {
    "MOVED": "this server is a Redis Cluster node: use a redis+cluster:// URL",
    "ASK": "this server is a Redis Cluster node: use a redis+cluster:// URL",
    "CROSSSLOT": "this server is a Redis Cluster node: use a redis+cluster:// URL",
    "READONLY": "this server is a read-only replica: point the URL at the primary",
    "OOM": "the server reached its maxmemory: free memory or raise maxmemory",
    "NOPERM": "the URL's user lacks a permission reactorflow needs: allow it in the ACL",
    "NOAUTH": "the server needs a password: put it in the URL",
}
"""What to do about an error reply, by its code."""


class StoragePoolExhausted(StorageError):
    """Every connection of this process's pool to the storage server stayed busy for the pool
    timeout: more storage calls at once than connections (the server itself is reachable).

    Attributes:
        url: The storage URL (without credentials).
        max_connections: The pool's size.
        waited: The seconds waited for a connection.
    """

    def __init__(self, url: str, max_connections: int, waited: float, *,
                 cause: BaseException | None = None) -> None:
        super().__init__(
            f"all {max_connections} connections of this process's pool to {url} (one pool per "
            f"event loop) were busy for {waited:g}s: more storage calls at once than "
            "connections. Pass a larger max_connections= (or pool_timeout=) to the storage, or "
            "make fewer calls at once. (Waiting for runs costs no pool connection.)",
            cause=cause,
        )
        self.url = url
        self.max_connections = max_connections
        self.waited = waited


class LockLost(StorageError):
    """A fenced write was refused: this execution no longer owns the run.

    Attributes:
        owner: The lock owner this execution wrote as.
    """

    def __init__(self, run_id: str, owner: str) -> None:
        super().__init__(
            f"this execution ({owner}) no longer holds run {run_id!r}'s lock: it expired and "
            "another execution took the run over (its keeper could not extend it for lock_ttl "
            "seconds: storage unreachable, or the process suspended). Nothing more was written "
            "by this one.",
            run_id=run_id,
        )
        self.owner = owner


class RunRecordGone(LockLost):
    """A fenced write found no record of the run at all: it expired or was deleted while this
    execution held it. Nothing was written. (A `LockLost`: the execution stops as for any lost
    lock, but nobody took the run over.)

    Attributes:
        owner: The lock owner this execution wrote as.
    """

    def __init__(self, run_id: str, owner: str) -> None:
        StorageError.__init__(
            self,
            f"run {run_id!r}'s record is gone from storage (it expired or was deleted) while "
            f"this execution ({owner}) was running it; nothing more was written by this one. "
            "No other execution took it over: start the run again if its work is still "
            "wanted (retention applies to ended runs only, so a run that has not ended "
            "disappears only if something deleted it).",
            run_id=run_id,
        )
        self.owner = owner


class CorruptRecord(StorageError):
    """A stored record of a run could not be decoded (corrupt, of the wrong type, or of an
    unknown schema version): that run cannot be read, every other run can. Not transient:
    reading it again fails the same way.

    Attributes:
        reason: Why the record cannot be read.
        field: The part of the record that cannot be read (a field such as `touched`, or
            `step 'charge'`), or `None` when unknown.
        key: The storage key it was read from (Redis), or `None`.
    """

    transient = False

    def __init__(self, run_id: str, reason: str, *, field: str | None = None,
                 key: str | None = None) -> None:
        where = "" if field is None else f" (its {field}{'' if key is None else f' in {key}'})"
        if field is None and key is not None:
            where = f" (key {key})"
        super().__init__(
            f"stored record of run {run_id!r} cannot be read{where}: {reason.rstrip('. ')}. "
            "Something other than this version of reactorflow wrote it, or it was damaged: "
            "restore it from a backup, or delete the run's keys; other runs are not affected.",
            run_id=run_id)
        self.reason = reason
        self.field = field
        self.key = key
