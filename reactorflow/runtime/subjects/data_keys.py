"""A subject's data key: created with the subject's first run, wrapped by the codec, opened for
each run of the subject, and the resolver that gives a run its keys
(`protection.resolve.set_resolver`: the seam where a per-run data key plugs in).

A data key is 32 random bytes. It is stored wrapped: sealed by the codec's `current` key as an
envelope (`protection.envelope`) whose associated data binds it to the subject (its key id,
`~<digest>`, stands as the "run id", `WRAP_FIELD` as the field), so a wrapped key moved to
another subject does not open. Its key id in every value it seals is `~<digest>`.

Resolving a run's keys, in order:
1. a run without a subject (its meta's `subject` is None): the codec's keys;
2. a new run (`new_run_keys`): a fresh data key is wrapped and offered to storage, which keeps
   the first one offered and enters the run in the subject's index in the same atomic write
   (`Storage.enter_subject_run`): concurrent first runs agree on one key;
3. a stored run (`resolve`): the wrapped key if the run is still indexed under it
   (`Storage.run_subject_key`); none: the subject was erased since the run began, and the
   run's values read `"<erased>"` (`RunKeys.erased`), even when a later run created a fresh key;
4. the wrapped key is opened with the codec key its envelope names; a process without that
   key (no codec, or the key retired before a rotation re-wrapped it) reads the run's values as
   `"<encrypted>"`.
"""

from __future__ import annotations

import os

from reactorflow import records
from reactorflow.definition import naming, registry
from reactorflow.errors import ConfigurationError, CorruptRecord
from reactorflow.protection import envelope
from reactorflow.protection import resolve as resolve_keys
from reactorflow.protection.codec import DATA_KEY_PREFIX, EncryptionCodec, cipher, invalid_tag
from reactorflow.protection.codec import nonce as new_nonce
from reactorflow.protection.keys import DataKey, RunKeys
from reactorflow.records import RunMeta
from reactorflow.storage.contract.decoding import reading
from reactorflow.storage.contract.storage import Storage

DATA_KEY_SIZE = 32
"""Bytes of a subject's data key (AES-256)."""
WRAP_FIELD = "subject.data_key"
"""The field a wrapped data key is bound to (with its subject's key id as the run)."""


def data_key_id(subject: str) -> str:
    """The key id of the data key of the subject with digest `subject`."""
    return DATA_KEY_PREFIX + subject


def wrap(codec: EncryptionCodec, subject: str, data_key: bytes) -> bytes:
    """`data_key` sealed by the codec's current key, bound to the subject."""
    head = envelope.header(codec.current)
    aead = codec.cipher_for(codec.current)
    assert aead is not None  # (current is among the codec's keys: checked at construction)
    iv = new_nonce()
    sealed = aead.encrypt(iv, data_key, envelope.associated(head, data_key_id(subject),
                                                            WRAP_FIELD))
    return envelope.pack(head, iv, sealed)


def wrapping_key(wrapped: bytes) -> str | None:
    """The codec key id a wrapped data key is sealed under (None: not an envelope)."""
    return envelope.key_id_of(wrapped)


def unwrap(codec: EncryptionCodec | None, subject: str, wrapped: bytes, *,
           run_id: str) -> bytes | None:
    """The data key inside `wrapped`; None when this process does not hold the codec key it
    is sealed under.

    Raises:
        CorruptRecord: it is no envelope, or fails authentication (named for `run_id`).
    """
    try:
        body = envelope.ext_data(wrapped)
        if body is None:
            raise envelope.BadEnvelope("it is not sealed")
        parts = envelope.parse(body)
    except envelope.BadEnvelope as exc:
        raise CorruptRecord(run_id, f"its subject's stored data key is damaged: {exc}",
                            field=WRAP_FIELD) from None
    aead = None if codec is None else codec.cipher_for(parts.key_id)
    if aead is None:
        return None
    try:
        return bytes(aead.decrypt(parts.nonce, parts.sealed,
                                  envelope.associated(parts.header, data_key_id(subject),
                                                      WRAP_FIELD)))
    except Exception as exc:
        if isinstance(exc, invalid_tag()):
            raise CorruptRecord(run_id, "its subject's stored data key fails authentication: "
                                "it was altered, or moved from another subject",
                                field=WRAP_FIELD) from None
        raise


def _run_keys(codec: EncryptionCodec | None, subject: str, wrapped: bytes,
              run_id: str) -> RunKeys:
    key = unwrap(codec, subject, wrapped, run_id=run_id)
    if key is None:
        return RunKeys(run_id, codec)  # the wrapping key is not held: "<encrypted>"
    key_id = data_key_id(subject)
    return RunKeys(run_id, codec, DataKey(key_id, cipher(key, key_id, what="data key")))


async def new_run_keys(storage: Storage, codec: EncryptionCodec | None,
                       meta: RunMeta) -> RunKeys:
    """The keys of a new run of a subject (`meta.subject`), entering it in the subject's index
    with the subject's data key (created now if the subject has none).

    Raises:
        ConfigurationError: no codec is configured (a subject's values are sealed under its
            data key, which the codec wraps); nothing is stored.
    """
    assert meta.subject is not None
    if codec is None:
        raise ConfigurationError(
            f"reactor {meta.reactor!r} declares subject=: its runs' values are sealed under "
            "each subject's data key, which the codec wraps, and no codec is configured; "
            "configure one first: rf.configure(codec=rf.EncryptionCodec(keys=..., "
            "current=...)) (nothing was stored)", option="codec")
    offered = wrap(codec, meta.subject, os.urandom(DATA_KEY_SIZE))
    wrapped = await storage.enter_subject_run(meta.subject, meta.id, offered)
    return _run_keys(codec, meta.subject, wrapped, meta.id)


async def resolve(storage: Storage, codec: EncryptionCodec | None, meta: RunMeta | None,
                  run_id: str) -> RunKeys:
    """The keys of a stored run (the resolver installed at import; see the module docstring):
    a run without a subject gets the codec's keys.

    Raises:
        CorruptRecord: the subject's stored data key is damaged.
        StorageError: the storage failed.
    """
    if meta is None:
        meta = await _stored_meta(storage, run_id)
    if meta is None or meta.subject is None:
        return RunKeys(run_id, codec)
    wrapped = await storage.run_subject_key(meta.subject, run_id)
    if wrapped is None:
        return RunKeys(run_id, codec, erased=True)
    return _run_keys(codec, meta.subject, wrapped, run_id)


async def _stored_meta(storage: Storage, run_id: str) -> RunMeta | None:
    """The stored meta of a run whose job did not load it (an element's or an async unit's),
    read only while some reactor of this process declares a subject."""
    if not subjects_declared():
        return None
    head = await storage.load_head(run_id)
    if head is None:
        return None
    with reading(run_id, "meta"):
        return records.decode_meta(head.meta)


def subjectless(name: str) -> bool:
    """Whether the runs of reactor `name` carry no subject for sure: this layer resolves run
    keys (another resolver may give any run a data key) and no version of `name` declared
    here has `subject=` (its runs' keys are then the codec's: nothing to read).

    Args:
        name: The reactor's name.
    """
    return resolve_keys.installed() is resolve and not registry.declares_subject(name)


# (the declaration generation it was worked out at, the answer): element and unit jobs ask
# on every job, and walking every declared reactor each time cost a lock and a sort per name
_declared: tuple[int, bool] = (-1, False)


def subjects_declared() -> bool:
    """Some reactor declared in this process (any version of it) has `subject=`.

    Worked out again only when a declaration changed (`naming.generation`). A reactor the
    garbage collector took bumps no generation, so the answer may stay True after the last
    subject reactor is gone: that costs a meta read, never a missed subject.
    """
    global _declared
    generation, answer = _declared
    now = naming.generation()
    if generation != now:
        answer = any(registry.declares_subject(name) for name in naming.names())
        _declared = (now, answer)
    return answer
