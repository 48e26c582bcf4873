"""The plugins' documentation is YAML that ansible-doc can read (ansible-lint only warns when it
cannot), the module documents exactly the options its argument spec takes, plus those its
action removes before the module runs, and each action without a module documents its spec."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml
from ansible_collections.verl_debug.cluster.plugins.action import node_probe, node_upload

PROJECT = Path(__file__).resolve().parents[2]
DOCUMENTED = sorted(
    path
    for path in (PROJECT / "plugins").glob("*/*.py")
    if "\nDOCUMENTATION = " in path.read_text()
)
# Options the node_files action takes and removes before the module runs.
ACTION_ONLY = {"observed", "witness"}


def blocks(path: Path) -> dict[str, str]:
    return {
        node.targets[0].id: node.value.value
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
        and isinstance(node.value, ast.Constant)
    }


@pytest.mark.parametrize("path", DOCUMENTED, ids=lambda path: path.stem)
def test_documentation_is_yaml(path: Path) -> None:
    for name, text in blocks(path).items():
        assert yaml.safe_load(text), f"{path.name}: {name} is empty"


def argument_spec(path: Path) -> dict:
    """The argument spec a module's main() hands AnsibleModule."""
    spec = importlib.util.spec_from_file_location(f"{path.stem}_module", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    taken: dict = {}

    class Capture:
        def __init__(self, argument_spec: dict, **_: object) -> None:
            taken.update(argument_spec)
            raise SystemExit

    module.AnsibleModule = Capture
    with pytest.raises(SystemExit):
        module.main()
    return taken


def test_node_files_documents_its_argument_spec() -> None:
    path = PROJECT / "plugins/modules/node_files.py"
    documented = yaml.safe_load(blocks(path)["DOCUMENTATION"])["options"]
    taken = argument_spec(path)
    assert set(documented) == set(taken) | ACTION_ONLY
    # The action renders an entry's template into its content; the module never sees it.
    assert set(documented["entries"]["suboptions"]) == set(taken["entries"]["options"]) | {
        "template"
    }


def test_node_list_documents_its_argument_spec() -> None:
    path = PROJECT / "plugins/modules/node_list.py"
    documented = yaml.safe_load(blocks(path)["DOCUMENTATION"])["options"]
    taken = argument_spec(path)
    assert set(documented) == set(taken)
    for name, option in taken.items():
        assert documented[name]["type"] == option["type"], name
        assert documented[name].get("default") == option.get("default"), name
        assert documented[name].get("required", False) == option.get("required", False), name


@pytest.mark.parametrize(
    "action", [node_probe, node_upload], ids=lambda action: action.__name__.rpartition(".")[2]
)
def test_an_action_without_a_module_documents_the_spec_it_checks(action: object) -> None:
    """Its options, types, defaults and requirements are the argument spec it validates the
    task's arguments against."""
    name = action.__name__.rpartition(".")[2]
    path = PROJECT / f"plugins/modules/{name}.py"
    documented = yaml.safe_load(blocks(path)["DOCUMENTATION"])["options"]
    assert set(documented) == set(action.ARGUMENT_SPEC)
    for option, spec in action.ARGUMENT_SPEC.items():
        assert {key: documented[option].get(key) for key in spec} == spec, option
