"""What every benchmark receives: the report, the sizes to use, and the Redis (started lazily)."""

from __future__ import annotations

from dataclasses import dataclass, field

import reactorflow as rf
from benchmarks import _redis
from benchmarks._report import Report


@dataclass(slots=True)
class Context:
    report: Report
    quick: bool
    reps: int
    _server: _redis.RedisServer | None = None
    _server_error: str | None = None
    _storages: list[rf.Storage] = field(default_factory=list)
    _namespaces: dict[int, str] = field(default_factory=dict)

    def pick(self, *, full: int, quick: int) -> int:
        return quick if self.quick else full

    def redis(self) -> _redis.RedisServer:
        """The Redis server, started on first use (RuntimeError with the reason if none)."""
        if self._server is None and self._server_error is None:
            try:
                self._server = _redis.start()
            except RuntimeError as exc:
                self._server_error = str(exc)
            else:
                self.report.out(f"  [redis] {self._server.description}")
                if self.report.header is not None:
                    self.report.header.redis = self._server.description
                    self.report.header.fsync = _redis.persistence(self._server.url)
        if self._server is None:
            raise RuntimeError(self._server_error or "no Redis")
        return self._server

    def redis_storage(self, name: str) -> rf.RedisStorage:
        """A RedisStorage in a namespace of its own (retention one hour: benchmark data)."""
        server = self.redis()
        namespace = server.namespace(name)
        storage = rf.RedisStorage.from_url(server.url, namespace=namespace, retention=3600)
        self._storages.append(storage)
        self._namespaces[id(storage)] = namespace
        return storage

    def namespace(self, storage: rf.Storage) -> str:
        """The key namespace of a storage made by `redis_storage`."""
        return self._namespaces[id(storage)]

    async def close_storages(self) -> None:
        storages, self._storages = self._storages, []
        self._namespaces.clear()
        for storage in storages:
            await storage.aclose()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
