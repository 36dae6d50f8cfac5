"""`RedisStorage`, the Redis backend: `storage.py` assembles it from its parts (gates, maps,
schedules, scans, the record pass) over one connector (`connections.py`, `wire.py`,
`pubsub.py`); key names in `keys.py`; one Lua file per script in `scripts/`."""
