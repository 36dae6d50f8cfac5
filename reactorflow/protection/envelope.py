"""The envelope: how a sealed value is stored, in bytes and in text.

A sealed value is a MessagePack **ext value of type `EXT_CODE` (82)**, so it sits wherever a
stored record holds an encoded value (a `msgspec.Raw` field: inputs, results, payloads, map
arguments and outcomes) and the record around it stays ordinary MessagePack that Lua scripts
and keyless readers decode. The ext's data is:

    format (1 byte, FORMAT) | n (1 byte) | key id (n bytes, UTF-8) | nonce (12) | ciphertext+tag

The ciphertext is AES-256-GCM over the value's clear encoding, its associated data
`AAD_PREFIX + format + n + key id + run id + NUL + field` (`associated`): a ciphertext moved to
another run or another field, or whose key id was changed, fails authentication.

Text (error messages and tracebacks, which records hold as `str`) is sealed the same way and
stored as `TEXT_PREFIX` followed by the ext data in base64.

Unambiguity: a clear value never reads as an envelope. The only clear value whose encoding
starts like one is a user's own `msgspec.msgpack.Ext(82, ...)`, which `reserved` refuses to
store; a clear text starting with `TEXT_PREFIX` is escaped (`escape_text`).
"""

from __future__ import annotations

import base64
import binascii
from typing import NamedTuple

import msgspec

EXT_CODE = 82
"""The MessagePack ext type of a sealed value (reserved: never a clear value's)."""
FORMAT = 1
"""The envelope format this version writes and reads."""
NONCE_SIZE = 12
TAG_SIZE = 16
AAD_PREFIX = b"reactorflow.sealed\x00"
TEXT_PREFIX = "\x00rf-sealed:"
"""How a sealed text starts (a NUL: no message or traceback reactorflow records starts so)."""
_EXT_HEADS = {0xC7: 1, 0xC8: 2, 0xC9: 4}  # ext 8/16/32: the size's bytes (fixext: too small)
_FIXEXT = frozenset({0xD4, 0xD5, 0xD6, 0xD7, 0xD8})


class Envelope(NamedTuple):
    """A sealed value taken apart (nothing checked but its shape)."""

    key_id: str
    header: bytes  # format, n, key id: covered by the associated data
    nonce: bytes
    sealed: bytes  # ciphertext + tag


class BadEnvelope(ValueError):
    """Bytes that claim to be an envelope (ext type 82, or the text prefix) but are not one."""


def associated(header: bytes, run_id: str, field: str) -> bytes:
    """The associated data binding an envelope to its run and field."""
    return b"".join((AAD_PREFIX, header, run_id.encode("utf-8", "surrogatepass"), b"\x00",
                     field.encode("utf-8", "surrogatepass")))


def header(key_id: str) -> bytes:
    """The envelope's clear head for `key_id` (format, length, key id)."""
    kid = key_id.encode("utf-8")
    return bytes((FORMAT, len(kid))) + kid


_EXT_CODE_BYTE = bytes((EXT_CODE,))


def pack(head: bytes, nonce: bytes, sealed: bytes) -> bytes:
    """The stored bytes of an envelope: a MessagePack ext value of type `EXT_CODE` (ext 8, 16
    or 32 by its size: an envelope is never smaller than a fixext's 16 bytes)."""
    size = len(head) + len(nonce) + len(sealed)
    if size < 0x100:
        lead = b"\xc7" + bytes((size,))
    elif size < 0x10000:
        lead = b"\xc8" + size.to_bytes(2, "big")
    else:
        lead = b"\xc9" + size.to_bytes(4, "big")
    return b"".join((lead, _EXT_CODE_BYTE, head, nonce, sealed))


def ext_data(data: bytes) -> bytes | None:
    """The ext data of `data` when it is one MessagePack ext value of type `EXT_CODE`, else
    None (any clear value; fast: two byte compares for everything but an ext)."""
    if not data:
        return None
    first = data[0]
    size_bytes = _EXT_HEADS.get(first)
    if size_bytes is None:
        if first in _FIXEXT and len(data) > 1 and data[1] == EXT_CODE:
            raise BadEnvelope("a fixed-size ext value of the reserved type 82")
        return None
    if len(data) <= 1 + size_bytes or data[1 + size_bytes] != EXT_CODE:
        return None
    size = int.from_bytes(data[1:1 + size_bytes], "big")
    body = data[2 + size_bytes:]
    if len(body) != size:
        raise BadEnvelope(f"ext data of {len(body)} bytes where its head says {size}")
    return body


def parse(body: bytes) -> Envelope:
    """An envelope's parts from its ext data.

    Raises:
        BadEnvelope: not an envelope of a format this version reads.
    """
    if len(body) < 2 or body[0] != FORMAT:
        raise BadEnvelope(f"envelope format {body[0] if body else None!r} is not {FORMAT}, "
                          "the one this version of reactorflow reads")
    n = body[1]
    start = 2 + n
    if len(body) < start + NONCE_SIZE + TAG_SIZE:
        raise BadEnvelope("the envelope is cut short")
    try:
        key_id = body[2:start].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadEnvelope("its key id is not UTF-8") from exc
    return Envelope(key_id, body[:start], body[start:start + NONCE_SIZE],
                    body[start + NONCE_SIZE:])


def text_body(text: str) -> bytes | None:
    """The ext data of a sealed text, else None (a clear text).

    Raises:
        BadEnvelope: it starts as a sealed text but is not base64.
    """
    if not text.startswith(TEXT_PREFIX):
        return None
    try:
        return base64.b64decode(text[len(TEXT_PREFIX):], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadEnvelope("a sealed text that is not base64") from exc


def text_of(head: bytes, nonce: bytes, sealed: bytes) -> str:
    """The stored text of a sealed text."""
    return TEXT_PREFIX + base64.b64encode(head + nonce + sealed).decode("ascii")


def escape_text(text: str) -> str:
    """A clear text as stored: one that starts like a sealed text gets its NUL spelled out."""
    return "\\x00" + text[1:] if text.startswith(TEXT_PREFIX) else text


def reserved(data: bytes) -> bool:
    """`data` (a clear value's encoding) is an ext value of the reserved type: never stored."""
    try:
        return ext_data(data) is not None
    except BadEnvelope:
        return True


def key_id_of(data: bytes | msgspec.Raw | str) -> str | None:
    """The key id a stored value (bytes, a record's Raw field, or text) is sealed under, or
    None when it is clear (or not an envelope at all): what `keys check` counts."""
    try:
        body = text_body(data) if isinstance(data, str) else ext_data(bytes(memoryview(data)))
        return None if body is None else parse(body).key_id
    except BadEnvelope:
        return None
