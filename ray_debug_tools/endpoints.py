"""Where a cluster's GCS and dashboard answer, from the operator's flags.

Every command takes --head (the default ports follow from it) or the addresses themselves.
"""

from dataclasses import dataclass

GCS_PORT = 6379
DASHBOARD_PORT = 8265


@dataclass(frozen=True)
class Endpoints:
    gcs: str | None
    dashboard: str | None


def resolve_endpoints(head: str | None, dashboard: str | None, gcs: str | None) -> Endpoints:
    """Explicit --dashboard/--gcs win over the defaults derived from --head."""
    if head:
        host = f"[{head}]" if ":" in head and not head.startswith("[") else head
        gcs = gcs or f"{host}:{GCS_PORT}"
        dashboard = dashboard or f"http://{host}:{DASHBOARD_PORT}"
    if dashboard and "://" not in dashboard:
        dashboard = f"http://{dashboard}"
    return Endpoints(gcs=gcs, dashboard=dashboard.rstrip("/") if dashboard else None)
