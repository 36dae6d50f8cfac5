"""Data subjects: whose personal data a run carries (`rf.Reactor(subject=...)`), the subject's
own data key that seals its runs' values, and erasing it (`rf.forget_subject`).

- `digests.py` — a run's subject from its inputs, and the digest it is stored under;
- `data_keys.py` — creating, wrapping and opening a subject's data key; the resolver that gives
  a run of a subject its data key (`protection.resolve`'s seam);
- `forget.py` — `rf.forget_subject` and `rf.list_erasures`;
- `rotation.py` — `reactorflow keys rotate` / `keys check`: re-sealing stored values.
"""
