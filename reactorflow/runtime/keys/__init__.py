"""Codec keys over the stored runs: `reactorflow keys check` (values per key id) and
`reactorflow keys rotate` (re-sealing stored values under the current key, so an old key can
be retired).

- `walk.py` — every stored value of a run, found in its records (what both commands visit);
- `rotation.py` — re-sealing a run's values and re-wrapping subjects' data keys, and counting
  values per key id.
"""
