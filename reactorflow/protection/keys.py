"""`RunKeys`: the keys one run's values are sealed and opened with, resolved once when an
execution (or a snapshot, or an element job) loads or creates the run, then carried with it in
process: sealing a value never reads storage.

Sealing (`seal`, `seal_raw`, `seal_text`), in order:
1. no codec configured: the clear value is stored as is (a user value that encodes as the
   reserved ext type is refused; a text that looks sealed is escaped);
2. else the key: the run's data key when it has one (`RunKeys.data_key`), else the codec's
   `current`;
3. a fresh 96-bit nonce; AES-256-GCM over the clear bytes with the associated data binding the
   envelope to the run id and the field (`envelope.associated`);
4. the envelope (`envelope.pack`, or `envelope.text_of` for text).

Opening (`open`, `open_raw`, `open_text`), in order:
1. not an envelope: a clear value (written before a codec was configured), returned as is;
   the first one a process meets with a codec configured logs one warning;
2. the key its key id names: the run's data key (a `~` id), else the codec's key of that id;
   none: `KeyUnavailable` (`erased` when the run's data key was destroyed);
3. AES-256-GCM decryption with the same associated data; a failure (a tampered byte, a value
   moved from another run or field) is `CorruptRecord` naming the run and the field.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import msgspec

from reactorflow.errors import CorruptRecord, KeyUnavailable
from reactorflow.protection import envelope
from reactorflow.protection.codec import (
    DATA_KEY_PREFIX,
    Cipher,
    EncryptionCodec,
    invalid_tag,
    nonce,
)

log = logging.getLogger("reactorflow.protection")

Value = bytes | msgspec.Raw
"""An encoded value: bytes, or a record's `msgspec.Raw` field."""
INPUTS = "inputs"  # (fields.INPUTS: the first value of every run, where clear values are noted)

ENCRYPTED = "<encrypted>"
"""What a reader without the value's key shows in its place (CLI, HTTP API, dashboard)."""
ERASED = "<erased>"
"""What a reader shows in place of a value whose subject was erased."""


@dataclass(frozen=True, slots=True)
class DataKey:
    """A per-run data key: its key id (`~<subject digest>`) and its cipher (unwrapped)."""

    key_id: str
    cipher: Cipher


@dataclass(frozen=True, slots=True)
class RunKeys:
    """The keys of one run's values.

    Attributes:
        run_id: The run (every envelope is bound to it).
        codec: The process's codec, or None (values are stored clear; envelopes do not open).
        data_key: The run's own data key: it seals the run's new values, and opens those
            naming its key id. None: the codec's keys do.
        erased: The run's data key was destroyed: a value naming a data key id reads as
            erased (`KeyUnavailable.erased`), never as merely encrypted.
    """

    run_id: str
    codec: EncryptionCodec | None
    data_key: DataKey | None = None
    erased: bool = False
    # put before every value's field (not text's: error text is run-wide, `fields.ERROR`): an
    # element reactor's execution's `maps.<map>.<i>.`
    prefix: str = ""
    _sealer: list[tuple[bytes, Cipher, bytes]] = field(default_factory=list, compare=False,
                                                       repr=False)  # (see `_sealing`)

    def within(self, prefix: str) -> RunKeys:
        """These keys for the values of a part of the run (an element reactor's execution):
        every field named under `prefix`."""
        return RunKeys(self.run_id, self.codec, self.data_key, self.erased, self.prefix + prefix)

    @property
    def seals(self) -> bool:
        """New values are encrypted (a codec or a data key is at hand)."""
        return self.codec is not None or self.data_key is not None

    # -- sealing -------------------------------------------------------------------------------

    def seal(self, field: str, data: Value) -> bytes:
        """`data` (a clear value's MessagePack encoding) as stored for `field`.

        Raises:
            TypeError: no codec and `data` is the reserved ext type (a user's own
                `msgspec.msgpack.Ext(82, ...)`).
        """
        if not self.seals:
            view = memoryview(data)
            if view and view[0] in _EXT_FIRST and envelope.reserved(bytes(view)):
                raise TypeError(f"msgpack ext type {envelope.EXT_CODE} is reserved for "
                                "reactorflow's sealed values; use another ext code")
            return data if isinstance(data, bytes) else bytes(view)
        head, aead, bound = self._sealing()
        iv = nonce()
        sealed = aead.encrypt(iv, data if isinstance(data, bytes) else bytes(data),
                              bound + (self.prefix + field).encode("utf-8", "surrogatepass"))
        return envelope.pack(head, iv, sealed)

    def seal_raw(self, field: str, data: Value) -> msgspec.Raw:
        """`seal`, as a record's `msgspec.Raw` field."""
        if not self.seals and isinstance(data, msgspec.Raw):
            self.seal(field, data)  # (checks it)
            return data
        return msgspec.Raw(self.seal(field, data))

    def seal_text(self, field: str, text: str) -> str:
        """A text (an error message, a traceback) as stored for `field`."""
        if not self.seals:
            return envelope.escape_text(text)
        if not text:
            return text
        head, aead, bound = self._sealing()
        iv = nonce()
        sealed = aead.encrypt(iv, text.encode("utf-8", "surrogatepass"),
                              bound + field.encode("utf-8", "surrogatepass"))
        return envelope.text_of(head, iv, sealed)

    def _sealing(self) -> tuple[bytes, Cipher, bytes]:
        """The sealing key's envelope head, its cipher and the associated data up to the field
        (`envelope.associated` without its last part), worked out once per `RunKeys`."""
        found = self._sealer
        if found:
            return found[0]
        if self.data_key is not None:
            key_id, aead = self.data_key.key_id, self.data_key.cipher
        else:
            assert self.codec is not None
            key_id = self.codec.current
            current = self.codec.cipher_for(key_id)
            assert current is not None
            aead = current
        head = envelope.header(key_id)
        made = (head, aead, envelope.associated(head, self.run_id, ""))
        found.append(made)
        return made

    # -- opening -------------------------------------------------------------------------------

    def open(self, field: str, data: Value) -> Value:
        """The clear encoding of a stored value of `field` (a clear one as is).

        Raises:
            KeyUnavailable: this process holds no key for it (or its subject was erased).
            CorruptRecord: it fails authentication (tampered, or moved from elsewhere).
        """
        view = memoryview(data)
        if not view or view[0] not in _EXT_FIRST:
            if field == INPUTS:
                self._clear_seen()
            return data
        try:
            body = envelope.ext_data(bytes(view))
            if body is None:
                return data
            return self._open_body(field, body)
        except envelope.BadEnvelope as exc:
            raise CorruptRecord(self.run_id, str(exc), field=self.prefix + field) from None

    def open_text(self, field: str, text: str) -> str:
        """The clear text of a stored text of `field` (a clear one as is).

        Raises:
            KeyUnavailable: this process holds no key for it.
            CorruptRecord: it fails authentication.
        """
        try:
            body = envelope.text_body(text)
            if body is None:
                return text
            clear = self._open_body(field, body, prefixed=False)
        except envelope.BadEnvelope as exc:
            raise CorruptRecord(self.run_id, str(exc), field=field) from None
        try:
            return clear.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise CorruptRecord(self.run_id, f"sealed text is not UTF-8: {exc}",
                                field=field) from None

    def shown_text(self, field: str, text: str) -> str:
        """`open_text` for a reader: a text it holds no key for is `"<encrypted>"` (or
        `"<erased>"`).

        Raises:
            CorruptRecord: it fails authentication.
        """
        try:
            return self.open_text(field, text)
        except KeyUnavailable as exc:
            return ERASED if exc.erased else ENCRYPTED

    def _open_body(self, field: str, body: bytes, *, prefixed: bool = True) -> bytes:
        field = self.prefix + field if prefixed else field
        parts = envelope.parse(body)
        aead = self._opening(field, parts.key_id)
        try:
            return aead.decrypt(parts.nonce, parts.sealed,
                                envelope.associated(parts.header, self.run_id, field))
        except Exception as exc:
            if isinstance(exc, invalid_tag()):
                raise CorruptRecord(
                    self.run_id, f"its encrypted value (key id {parts.key_id!r}) fails "
                    "authentication: it was altered, or moved from another run or field",
                    field=field) from None
            raise

    def _opening(self, field: str, key_id: str) -> Cipher:
        if key_id.startswith(DATA_KEY_PREFIX):
            if self.data_key is not None and self.data_key.key_id == key_id:
                return self.data_key.cipher
            raise KeyUnavailable(self.run_id, field, key_id, erased=self.erased)
        found = None if self.codec is None else self.codec.cipher_for(key_id)
        if found is None:
            raise KeyUnavailable(self.run_id, field, key_id)
        return found

    def _clear_seen(self) -> None:
        global _warned
        if not _warned and self.codec is not None:
            _warned = True
            log.warning("reactorflow.protection.clear_value: run %r holds values stored "
                        "without a codec; they stay readable, and new values are encrypted "
                        "(see Protecting data: mixed reading)", self.run_id)


_EXT_FIRST = frozenset((0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8))  # ext heads
_warned = False
