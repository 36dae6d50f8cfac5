"""Errors of data protection (reactorflow.protection): a stored value that this process holds
no key for."""

from __future__ import annotations

from reactorflow.errors.core import ReactorflowError


class KeyUnavailable(ReactorflowError):
    """A stored value of a run is encrypted under a key this process does not hold: no codec
    is configured, the codec does not list the value's key id, or the run's subject was
    erased (`erased`). Reading surfaces show `"<encrypted>"` (or `"<erased>"`) instead; the
    engine refuses to run a step on such a value and writes nothing.

    Attributes:
        field: The value's field (`"inputs"`, `"steps.<key>.result"`, `"error"`...).
        key_id: The key id the value names.
        erased: The key was destroyed with its subject (`rf.forget_subject`).
    """

    def __init__(self, run_id: str, field: str, key_id: str, *, erased: bool = False) -> None:
        if erased:
            what = (f"was sealed under the data key of a subject that was erased ({key_id!r}); "
                    "it can never be read again")
        else:
            what = (f"is encrypted under key id {key_id!r}, which this process does not hold: "
                    "configure rf.configure(codec=rf.EncryptionCodec(keys=..., current=...)) "
                    "with that key id among its keys")
        super().__init__(f"run {run_id!r}: its stored {field} {what}", run_id=run_id)
        self.field = field
        self.key_id = key_id
        self.erased = erased
