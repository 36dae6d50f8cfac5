"""`GET /metrics`: Prometheus text exposition, with the `prometheus` extra
(`pip install 'reactorflow[prometheus]'`), made by the official `prometheus-client` library.

It exposes `reactorflow_runs{reactor, status}`, a gauge of the runs stored per reactor and
status (`Storage.count_runs`: read from the status indexes, never a scan), plus whatever is
registered in prometheus-client's default registry of this process (its process and platform
collectors, and anything your app registers there, e.g. an OpenTelemetry Prometheus reader's
collector). Without the extra it answers 404 with a one-line JSON error saying what to install.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from reactorflow import config
from reactorflow.web.responses import JSON

try:
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError:  # the extra is not installed: `metrics` says so
    INSTALLED = False
else:
    INSTALLED = True

MISSING = ("GET /metrics needs the prometheus extra: pip install 'reactorflow[prometheus]'")


async def metrics(request: Request) -> Response:
    """The exposition (or a 404 naming the extra to install)."""
    if not INSTALLED:
        return JSON({"error": "NotInstalled", "message": MISSING}, status_code=404)
    counts = await config.current_storage().count_runs()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StoredRuns(counts))
    registry.register(_Default())
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


if INSTALLED:
    class _StoredRuns(Collector):
        """Runs stored per reactor and status, as counted once for this scrape."""

        def __init__(self, counts: dict[tuple[str, str], int]) -> None:
            self._counts = counts

        def collect(self) -> Iterable[Any]:
            family = GaugeMetricFamily(
                "reactorflow_runs", "Runs stored per reactor and status (from the status "
                "indexes)", labels=["reactor", "status"])
            for (reactor, status), count in sorted(self._counts.items()):
                family.add_metric([reactor, status], count)
            yield family

    class _Default(Collector):
        """What prometheus-client's default registry of this process holds."""

        def collect(self) -> Iterator[Any]:
            yield from REGISTRY.collect()
