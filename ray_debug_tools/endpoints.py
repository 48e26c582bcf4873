"""Where a cluster's GCS and dashboard answer, from the operator's flags.

Every command takes --head (the default ports follow from it) or the addresses themselves.
"""

import argparse
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


def dashboard_parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """The parser of a command that talks to the head's dashboard alone: --head or
    --dashboard, one of them; `dashboard_url` reads them back."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--head", help=f"head host (dashboard :{DASHBOARD_PORT})")
    where.add_argument("--dashboard", help="dashboard URL, e.g. http://HOST:8265")
    return parser


def dashboard_url(args: argparse.Namespace) -> str:
    return str(resolve_endpoints(args.head, args.dashboard, None).dashboard)
