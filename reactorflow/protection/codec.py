"""`rf.EncryptionCodec`: the process's keys, AES-256-GCM from the `cryptography` package (the
`crypto` extra). `current` seals, every listed key opens (rotation). A key is never printed:
errors and the codec's `repr` name key ids only."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any, Protocol

from reactorflow.errors import ConfigurationError
from reactorflow.protection import envelope

KEY_SIZE = 32
"""Bytes of a key (AES-256)."""


class Cipher(Protocol):
    """What sealing needs of an AEAD (cryptography's `AESGCM`)."""

    def encrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes: ...

    def decrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes: ...


def _aead() -> tuple[Any, type[Exception]]:
    """cryptography's `AESGCM` and `InvalidTag`, or a ConfigurationError naming the extra."""
    try:
        aead = importlib.import_module("cryptography.hazmat.primitives.ciphers.aead")
        exceptions = importlib.import_module("cryptography.exceptions")
    except ImportError as exc:
        raise ConfigurationError(
            "rf.EncryptionCodec needs the cryptography package: pip install 'reactorflow[crypto]'",
            option="codec") from exc
    return aead.AESGCM, exceptions.InvalidTag


def cipher(key: object, key_id: str, *, what: str = "key") -> Cipher:
    """An AES-256-GCM cipher on `key` (32 raw bytes), checked.

    Raises:
        ConfigurationError: not bytes, or not 32 of them (naming `key_id`, never the key).
    """
    if not isinstance(key, bytes | bytearray | memoryview):
        raise ConfigurationError(
            f"rf.EncryptionCodec: {what} {key_id!r} is a {type(key).__name__}; a key is "
            f"{KEY_SIZE} raw bytes (os.urandom({KEY_SIZE}); decode a stored base64 or hex key "
            "first)", option="codec")
    size = len(bytes(key))
    if size != KEY_SIZE:
        raise ConfigurationError(
            f"rf.EncryptionCodec: {what} {key_id!r} is {size} bytes; AES-256 keys are "
            f"{KEY_SIZE} raw bytes (os.urandom({KEY_SIZE}))", option="codec")
    aesgcm, _ = _aead()
    made: Cipher = aesgcm(bytes(key))
    return made


class EncryptionCodec:
    """Encrypts every user value reactorflow stores (inputs, results, payloads, map items and
    outcomes, error text) with AES-256-GCM, each bound to its run and field.

    Configure it with `rf.configure(codec=rf.EncryptionCodec(keys=..., current=...))`;
    `rf.configure(codec=None)` removes it. See [Protecting data](protecting-data.md).

    Args:
        keys: Key id -> key (32 raw bytes). Every listed key decrypts; a key id is stored in
            clear with each value (1-255 UTF-8 bytes, not starting with `~`, which names
            per-run data keys).
        current: The key id that encrypts new values; one of `keys`.

    Raises:
        ConfigurationError: no keys, a key that is not 32 bytes, a bad key id, `current` not
            among `keys`, or the `crypto` extra missing (naming the key id, never a key).
    """

    __slots__ = ("_ciphers", "current")

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        if not isinstance(keys, Mapping) or not keys:
            raise ConfigurationError(
                "rf.EncryptionCodec(keys=...): give at least one key, as {key_id: 32 raw bytes}",
                option="codec")
        ciphers: dict[str, Cipher] = {}
        for key_id, key in keys.items():
            check_key_id(key_id)
            ciphers[key_id] = cipher(key, key_id)
        if not isinstance(current, str) or current not in ciphers:
            raise ConfigurationError(
                f"rf.EncryptionCodec(current={current!r}): not among the key ids "
                f"{', '.join(map(repr, ciphers))}; current must name one of keys",
                option="codec")
        self._ciphers = ciphers
        self.current = current

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The key ids it holds (each decrypts)."""
        return tuple(self._ciphers)

    def cipher_for(self, key_id: str) -> Cipher | None:
        """The cipher of a key it holds (what seals and opens values), never the key itself.

        Args:
            key_id: One of its key ids.

        Returns:
            The key's AES-256-GCM cipher, or None when it holds no such key id.
        """
        return self._ciphers.get(key_id)

    def __repr__(self) -> str:
        ids = ", ".join(map(repr, self._ciphers))
        return f"EncryptionCodec(keys=[{ids}], current={self.current!r})"


def check_key_id(key_id: object) -> None:
    """A codec key id: a str of 1-255 UTF-8 bytes, not starting with `~` (data keys' prefix).

    Raises:
        ConfigurationError: it is not.
    """
    if (not isinstance(key_id, str) or not key_id or len(key_id.encode("utf-8")) > 255
            or key_id.startswith(DATA_KEY_PREFIX)):
        raise ConfigurationError(
            f"rf.EncryptionCodec: key id {key_id!r} must be a str of 1 to 255 UTF-8 bytes, not "
            f"starting with {DATA_KEY_PREFIX!r} (reserved for per-run data keys)",
            option="codec")


DATA_KEY_PREFIX = "~"
"""How the key id of a per-run data key starts (`~<subject digest>`)."""


_invalid_tag: list[type[Exception]] = []


def invalid_tag() -> type[Exception]:
    """What a failed authentication raises (cryptography's `InvalidTag`)."""
    if not _invalid_tag:
        _invalid_tag.append(_aead()[1])
    return _invalid_tag[0]


def nonce() -> bytes:
    """A fresh random nonce (96 bits: AES-GCM's own size)."""
    return os.urandom(envelope.NONCE_SIZE)
