"""The batches cluster-up starts Ray in: the head together with the first workers, then the
rest of the workers a batch at a time."""

from __future__ import annotations

from typing import Any


def start_batches(batch: str | int, workers: int) -> list[int]:
    """`serial` of the play that starts Ray on the head and the workers, the head first in its
    host list: the head and `batch` workers at once, then `batch` workers at a time.

    `batch` is ray_worker_batch (validated): a number of workers, or a percentage of the
    inventory's `workers`, rounded down as Ansible rounds `serial`, and at least one.
    """
    text = str(batch)
    size = max(1, int(int(text[:-1]) / 100 * workers)) if text.endswith("%") else int(text)
    return [size + 1, size]


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "ray_start_batches": start_batches,
        }
