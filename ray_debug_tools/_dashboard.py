"""The head's dashboard, read with the cluster token where auth is on: the one way the
operator commands read it (its JSON routes and the state API's rows)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, NamedTuple

from ray._private.authentication.http_token_authentication import (
    get_auth_headers_if_auth_enabled,
)

from ray_debug_tools._net import RayDebugConnectionError


def dashboard_get(url: str, timeout: float) -> Any:
    """GET `url` from the dashboard as JSON, with the token Ray's client settings name.

    A refusal names what to set; a head that does not answer raises RayDebugConnectionError.
    """
    request = urllib.request.Request(url, headers=get_auth_headers_if_auth_enabled({}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise RuntimeError(
                f"{url} answered HTTP {exc.code} {exc.reason}: set RAY_AUTH_MODE=token "
                "and RAY_AUTH_TOKEN_PATH to the cluster's token file (see the runbook)"
            ) from exc
        raise RuntimeError(f"{url} answered HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, TimeoutError) as exc:
        raise RayDebugConnectionError(f"{url} unreachable: {exc}") from exc


def state_api_rows(
    url: str,
    timeout: float,
    filters: list[tuple[str, str, str]] | None = None,
) -> list[dict[str, Any]]:
    # The state API truncates to 100 rows by default; 10000 is its server-side maximum.
    query = [("detail", "1"), ("limit", "10000")]
    # The server zips repeated filter_keys/filter_predicates/filter_values in order.
    for key, predicate, value in filters or []:
        query += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
    payload = dashboard_get(f"{url}?{urllib.parse.urlencode(query)}", timeout)
    if not payload.get("result"):
        raise RuntimeError(f"state API {url} failed: {payload.get('msg')}")
    return payload["data"]["result"]["result"]


class JobIds(NamedTuple):
    """A job's two names: the submission id (`ray job submit` prints it; none for a driver
    started by hand) and the Ray job id (hex; none until the driver has connected)."""

    submission_id: str | None
    job_id: str | None

    @property
    def known(self) -> list[str]:
        return [value for value in self if value]


def job_ids(dashboard: str, job: str, timeout: float) -> JobIds:
    """Both ids of `job`, given either (what `ray job submit` printed, or what `ray list jobs`
    and `verl-debug stacks` show); LookupError names the cluster's jobs if it has no such job."""
    jobs: list[dict[str, Any]] = dashboard_get(f"{dashboard.rstrip('/')}/api/jobs/", timeout)
    for each in jobs:
        ids = JobIds(each.get("submission_id") or None, each.get("job_id") or None)
        if job in ids:
            return ids
    known = ", ".join(sorted(str(each.get("submission_id") or each.get("job_id")) for each in jobs))
    raise LookupError(f"no job {job!r} on this cluster; its jobs: {known or 'none'}")
