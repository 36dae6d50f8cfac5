"""The run operations behind `Reactor`'s methods: creation, idempotency, resume, retry, lookup,
snapshots, the runtime service."""
