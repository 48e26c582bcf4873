"""The node templates rendered on the controller, as the roles render them: through
ansible-playbook with the roles' defaults (tests/integration/playbooks/render_templates.yml)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
TEMPLATES = [
    "ray_service/templates/ray.service.j2",
    "ray_service/templates/ray.env.j2",
    "ray_service/templates/profile.sh.j2",
    "ray_firewall/templates/firewall.nft.j2",
    "wheelhouse/templates/ray-wheelhouse.service.j2",
    "runbook/templates/RUNBOOK.md.j2",
]


def render(out: Path, **variables: object) -> Path:
    """Render the templates into out/MODE/NAME, with `variables` over the playbook's."""
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(PROJECT / "tests/integration/inventory/render.yml"),
            str(PROJECT / "tests/integration/playbooks/render_templates.yml"),
            "-e",
            json.dumps({"render_dir": str(out), "render_templates": TEMPLATES, **variables}),
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for path, text in json.loads((out / "rendered.json").read_text()).items():
        (out / path).parent.mkdir(exist_ok=True)
        (out / path).write_text(text)
    return out
