"""Resolving a run's keys (`RunKeys`) once, when an execution, a snapshot or a job loads or
creates the run: the one seam where a per-run data key plugs in (see protection/SEAM.md).

The default resolver (`codec_keys`) gives every run the configured codec's keys. The subjects
layer installs its own with `set_resolver`: a run with a subject gets its data key (or learns
that it was erased).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from reactorflow import config, records
from reactorflow.protection.codec import EncryptionCodec
from reactorflow.protection.keys import RunKeys

if TYPE_CHECKING:
    from reactorflow.records import RunMeta
    from reactorflow.storage.contract.storage import Storage

Resolver = Callable[["Storage", "EncryptionCodec | None", "RunMeta | None", str],
                    Awaitable[RunKeys]]


async def codec_keys(storage: Storage, codec: EncryptionCodec | None, meta: RunMeta | None,
                     run_id: str) -> RunKeys:
    """The default resolver: no data key, the codec's keys seal and open."""
    return RunKeys(run_id, codec)


_resolver: Resolver = codec_keys


def installed() -> Resolver:
    """The resolver every run's keys come from now."""
    return _resolver


def set_resolver(resolver: Resolver | None) -> Resolver:
    """Install the resolver every run's keys come from (None: the default, `codec_keys`); returns
    the one it replaces (to put back). The subjects layer installs its own at import
    (`reactorflow/__init__.py`): a run with a subject gets its data key."""
    global _resolver
    previous, _resolver = _resolver, resolver or codec_keys
    return previous


async def run_keys(storage: Storage, meta: RunMeta | None, run_id: str) -> RunKeys:
    """The keys of run `run_id` (its `meta` when the caller has it decoded), with the
    configured codec: resolved once per execution, snapshot or job, then carried with it.

    Args:
        storage: Where the run is stored (a resolver may read its data key there).
        meta: The run's meta (None: an element or unit job, which never loads its run).
        run_id: The run.
    """
    return await _resolver(storage, config.settings().codec, meta, run_id)


def plain_keys(run_id: str) -> RunKeys:
    """The keys of a run under the configured codec without a data key (synchronous: for
    values written where no execution carries keys, such as a fresh run's inputs before the
    subjects layer resolves its key)."""
    return RunKeys(run_id, config.settings().codec)


async def stored_keys(storage: Storage, run_id: str, meta: bytes) -> RunKeys:
    """`run_keys` for a run read from storage, given its encoded meta (a meta that does not
    decode gets the codec's keys, without a data key: whoever reads the run reports it)."""
    try:
        decoded = records.decode_meta(meta)
    except (ValueError, TypeError):  # (not read again by the resolver: it would fail the same)
        return plain_keys(run_id)
    return await run_keys(storage, decoded, run_id)
