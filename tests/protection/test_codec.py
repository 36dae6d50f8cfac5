"""`rf.EncryptionCodec` and `rf.configure(codec=)` refuse bad input with a
`rf.ConfigurationError` naming the key id and never printing a key; the envelope can never be
mistaken for a clear value (api.md §17)."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.protection import envelope
from reactorflow.protection.keys import RunKeys

KEY = os.urandom(32)


@pytest.mark.parametrize(("keys", "current", "says"), [
    ({}, "k1", "at least one key"),
    ({"k1": os.urandom(16)}, "k1", "'k1' is 16 bytes"),
    ({"k1": os.urandom(33)}, "k1", "'k1' is 33 bytes"),
    ({"k1": "x" * 32}, "k1", "'k1' is a str"),
    ({"k1": KEY}, "k2", "current='k2'"),
    ({"": KEY}, "", "key id ''"),
    ({"~s": KEY}, "~s", "reserved for per-run data keys"),
], ids=["empty", "short", "long", "text", "current", "blank-id", "data-key-id"])
def test_bad_keys_are_refused_naming_the_key_id(keys: dict[str, object], current: str,
                                                 says: str) -> None:
    with pytest.raises(rf.ConfigurationError) as caught:
        rf.EncryptionCodec(keys=keys, current=current)  # type: ignore[arg-type]
    assert says in caught.value.message
    assert caught.value.option == "codec"
    for key in keys.values():
        if isinstance(key, bytes) and key:
            assert repr(key)[2:-1] not in caught.value.message
            assert key.hex() not in caught.value.message


def test_the_codec_never_shows_its_keys() -> None:
    made = rf.EncryptionCodec(keys={"k1": KEY, "k2": os.urandom(32)}, current="k2")
    assert repr(made) == "EncryptionCodec(keys=['k1', 'k2'], current='k2')"
    assert made.key_ids == ("k1", "k2")


def test_configure_takes_a_codec_or_none() -> None:
    try:
        with pytest.raises(rf.ConfigurationError) as caught:
            rf.configure(codec="k1")  # type: ignore[arg-type]
        assert caught.value.option == "codec"
        made = rf.EncryptionCodec(keys={"k1": KEY}, current="k1")
        assert rf.configure(codec=made).codec is made
        assert rf.configure(codec=None).codec is None
    finally:
        config.reset()


def test_without_the_crypto_extra_the_codec_names_it() -> None:
    """A process where `cryptography` cannot be imported (the extra not installed)."""
    script = ("import sys; sys.modules['cryptography'] = None\n"
              "import reactorflow as rf\n"
              "try:\n"
              "    rf.EncryptionCodec(keys={'k1': bytes(32)}, current='k1')\n"
              "except rf.ConfigurationError as exc:\n"
              "    print(exc.message)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=60)
    assert "pip install 'reactorflow[crypto]'" in done.stdout


def test_a_sealed_value_is_never_a_clear_one() -> None:
    made = rf.EncryptionCodec(keys={"k1": KEY}, current="k1")
    keys = RunKeys("run-1", made)
    for value in (None, 0, "", "text", b"\xc7", [1, 2], {"a": 1},
                  msgspec.msgpack.Ext(81, b"x" * 40)):
        clear = msgspec.msgpack.encode(value)
        assert envelope.key_id_of(clear) is None  # clear values read as clear
        sealed = keys.seal("inputs", clear)
        assert envelope.key_id_of(sealed) == "k1"
        assert keys.open("inputs", sealed) == clear
    plain = RunKeys("run-1", None)
    with pytest.raises(TypeError, match="ext type 82 is reserved"):
        plain.seal("inputs", msgspec.msgpack.encode(msgspec.msgpack.Ext(82, b"x" * 40)))
    lookalike = envelope.TEXT_PREFIX + "not sealed"
    stored = plain.seal_text("error", lookalike)
    assert not stored.startswith(envelope.TEXT_PREFIX)
    assert keys.open_text("error", stored) == stored  # read back as the clear text it is


def test_the_field_and_the_run_are_bound() -> None:
    made = rf.EncryptionCodec(keys={"k1": KEY}, current="k1")
    sealed = RunKeys("run-1", made).seal("steps.a.result", b"\x01")
    assert RunKeys("run-1", made).open("steps.a.result", sealed) == b"\x01"
    for run_id, field in (("run-2", "steps.a.result"), ("run-1", "steps.b.result")):
        with pytest.raises(rf.CorruptRecord) as caught:
            RunKeys(run_id, made).open(field, sealed)
        assert (caught.value.run_id, caught.value.field) == (run_id, field)
    renamed = sealed.replace(b"\x02k1", b"\x02k2")  # the key id edited in the envelope
    other = rf.EncryptionCodec(keys={"k2": KEY}, current="k2")
    with pytest.raises(rf.CorruptRecord):
        RunKeys("run-1", other).open("steps.a.result", renamed)


@pytest.mark.parametrize("size", [1, 200, 300, 70_000])
def test_the_envelope_is_the_msgpack_ext_value_msgspec_reads(size: int) -> None:
    head, nonce, sealed = envelope.header("k1"), b"n" * 12, b"x" * size
    packed = envelope.pack(head, nonce, sealed)
    assert msgspec.msgpack.decode(packed) == msgspec.msgpack.Ext(82, head + nonce + sealed)
    assert envelope.ext_data(packed) == head + nonce + sealed


def test_an_error_message_that_looks_sealed_is_stored_as_the_clear_text_it_is() -> None:
    from reactorflow import records
    from reactorflow.protection import sealing

    made = rf.EncryptionCodec(keys={"k1": KEY}, current="k1")
    keys = RunKeys("run-1", made)
    error = ValueError(envelope.TEXT_PREFIX + "gotcha")
    record = records.ErrorRecord.from_exception(error)
    stored = sealing.error(keys, record)
    assert stored is not None and stored.message.startswith(envelope.TEXT_PREFIX)  # sealed
    assert keys.open_text("error", stored.message).endswith("rf-sealed:gotcha")
