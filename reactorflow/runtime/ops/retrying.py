"""`reactor.retry(run_id)`: start a new run with the inputs of a run that ended badly.

The algorithm, in order:

1. Read the old run's head (it must exist and belong to this reactor).
2. Refuse unless it is `failed`, `cancelled` or `aborted` (`RunStateError`): a completed run
   has nothing to retry, and a live one is still going.
3. Decode its stored inputs with the reactor's current input type (validated again by `start`,
   so inputs the current code refuses fail with `InputValidationError`).
4. Start a new run exactly as `run` would (or as `dispatch` for an `always_dispatch` reactor)
   whose meta records `retried_from`; the old run is left untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from reactorflow import config, records
from reactorflow.errors import CorruptRecord, RunStateError
from reactorflow.protection import fields
from reactorflow.protection.resolve import run_keys
from reactorflow.runtime.ops import operations
from reactorflow.runtime.ops.lookup import plan_or_none
from reactorflow.runtime.ops.snapshots import run_status
from reactorflow.snapshot import Run
from reactorflow.status import Status

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

RETRYABLE = frozenset({Status.FAILED, Status.CANCELLED, Status.ABORTED})


async def retry(reactor: Reactor, run_id: str, *, dispatch: bool = False) -> Run:
    """Start a new run of `reactor` with the inputs of run `run_id` (see the module)."""
    storage = config.current_storage()
    head = await operations.head_of(reactor, storage, run_id)
    status = run_status(head)
    if status not in RETRYABLE:
        raise RunStateError(run_id, status, "retry")
    try:
        meta = records.decode_meta(head.meta)
        plan = plan_or_none(reactor)
        # sealed inputs are opened first: a value failing authentication, or a key not held,
        # raises here, before anything is written
        clear = (await run_keys(storage, meta, run_id)).open(fields.INPUTS, meta.inputs)
        try:
            inputs = (plan.levels[""].inputs_decoder.decode(clear) if plan is not None
                      else msgspec.msgpack.decode(clear))
        except msgspec.ValidationError:  # readable, but not what the inputs type is now:
            inputs = msgspec.msgpack.decode(clear)  # `start` names the refused field
    except msgspec.DecodeError as exc:
        raise CorruptRecord(run_id, f"its inputs cannot be read for a retry: {exc}") from exc
    return await operations.start(reactor, inputs, {}, dispatch=dispatch, retried_from=run_id)
