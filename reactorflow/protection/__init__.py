"""Data protection: the codec that encrypts every user value reactorflow stores, and the seam
where a run's values are sealed and opened.

- `codec.py` — `rf.EncryptionCodec` (keys, `current`), on cryptography's AES-256-GCM;
- `envelope.py` — how a sealed value is stored (a MessagePack ext value; text in base64);
- `keys.py` — `RunKeys`, one run's keys: seal and open a value of a named field;
- `resolve.py` — resolving a run's keys once per execution, snapshot or job (`run_keys`), the
  seam a per-run data key plugs into (`set_resolver`).
"""

from __future__ import annotations

from reactorflow.protection.codec import EncryptionCodec
from reactorflow.protection.keys import ENCRYPTED, ERASED, DataKey, RunKeys

__all__ = ["ENCRYPTED", "ERASED", "DataKey", "EncryptionCodec", "RunKeys"]
