"""nvidia-smi's GPU list, `nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`, read
once for the facts play's inventory (ray_gpus) and the proof's judge (ray_gpu_proof).

nvidia-smi joins a GPU's values with ", " and quotes none of them, so a GPU whose name holds a
comma prints more commas than fields, and neither str.split nor the csv module can tell them
apart. The name is the only free text: the fields before it are split off the left of the line,
those after it off the right, and the name is what lies between, as nvidia-smi printed it.
"""

from __future__ import annotations

from collections.abc import Sequence


def query_rows(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """{field: value} for each GPU in `text`, `fields` being the --query-gpu list (with "name").

    Raises ValueError naming the first line that is not a GPU's: a value missing, or an index
    that is not a number.
    """
    names = list(fields)
    before = names.index("name")
    after = len(names) - before - 1
    rows = []
    for line in filter(str.strip, text.splitlines()):
        head = line.split(",", before)
        tail = head.pop().rsplit(",", after)
        values = [value.strip() for value in head + tail]
        row = dict(zip(names, values, strict=False))
        # A message nvidia-smi printed instead of a GPU has no number where the index goes.
        if len(values) != len(names) or not row.get("index", "0").isdigit():
            raise ValueError(f"unexpected nvidia-smi output: {line.strip()[:200]!r}")
        rows.append(row)
    return rows
