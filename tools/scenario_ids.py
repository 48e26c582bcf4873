"""The test ids each molecule scenario's verify collects, kept in molecule/SCENARIO/test-ids.txt.

tests/policy/test_scenario_ids.py fails when a scenario's collection and its list differ, so a
change that drops a check from a scenario shows in the diff of that list, where its commit
must say why. Collection needs no cluster: the hosts come from the shared molecule config,
named as the scenario's nodes.env names them.

    python -m tools.scenario_ids            # print every scenario's ids
    python -m tools.scenario_ids --write    # rewrite the lists
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]
SCENARIOS = ("post_mortem", "online", "faults")
TESTS = PROJECT / "molecule/shared/tests"


def selection(scenario: str) -> dict[str, str]:
    """The scenario's -k and -m, over the shared config's (molecule merges them that way)."""
    options: dict[str, str] = {}
    for config in (
        PROJECT / ".config/molecule/config.yml",
        PROJECT / f"molecule/{scenario}/molecule.yml",
    ):
        verifier = (yaml.safe_load(config.read_text()) or {}).get("verifier") or {}
        options.update(verifier.get("options") or {})
    return {key: str(value).strip() for key, value in options.items() if key in ("k", "m")}


def nodes_env(scenario: str) -> dict[str, str]:
    """The scenario's node name prefix and subnet, as the Makefile gives them to molecule."""
    lines = (PROJECT / f"molecule/{scenario}/nodes.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def inventory(env: dict[str, str]) -> dict:
    """The shared config's hosts and groups, as molecule's inventory names them with `env`."""
    # Molecule's interpolation of ${NAME} and ${NAME:-default}.
    config = re.sub(
        r"\$\{(\w+)(?::-([^}]*))?\}",
        lambda variable: env.get(variable[1]) or variable[2] or "",
        (PROJECT / ".config/molecule/config.yml").read_text(),
    )
    platforms = yaml.safe_load(config)["platforms"]
    groups: dict[str, dict] = {}
    for platform in platforms:
        for group in platform["groups"]:
            groups.setdefault(group, {"hosts": {}})["hosts"][platform["name"]] = {}
    return {"all": {"children": groups}}


def collected(scenario: str) -> list[str]:
    with tempfile.TemporaryDirectory() as ephemeral:
        hosts = Path(ephemeral, "inventory.yml")
        scenario_env = nodes_env(scenario)
        hosts.write_text(yaml.safe_dump(inventory(scenario_env)))
        env = dict(
            os.environ,
            **scenario_env,
            MOLECULE_EPHEMERAL_DIRECTORY=ephemeral,
            MOLECULE_INVENTORY_FILE=str(hosts),
            MOLECULE_PROJECT_DIRECTORY=str(PROJECT),
            MOLECULE_SCENARIO_NAME=scenario,
        )
        chosen = [f"-{key}={value}" for key, value in selection(scenario).items()]
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                "--connection=ansible",
                f"--ansible-inventory={hosts}",
                *chosen,
            ],
            cwd=TESTS,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    if run.returncode != 0:
        raise RuntimeError(
            f"collecting {scenario} failed:\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
        )
    return [line for line in run.stdout.splitlines() if "::" in line]


def listed(scenario: str) -> Path:
    return PROJECT / f"molecule/{scenario}/test-ids.txt"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite molecule/*/test-ids.txt")
    write = parser.parse_args(argv).write
    for scenario in SCENARIOS:
        ids = collected(scenario)
        if write:
            listed(scenario).write_text("".join(f"{test_id}\n" for test_id in ids))
        else:
            print(f"# {scenario}: {len(ids)}", *ids, sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
