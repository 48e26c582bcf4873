"""docs/roles.md is generated from the roles' argument specs and defaults: a spec or default
changed without `make docs` fails here, so the page never drifts from what validation
enforces."""

from __future__ import annotations

from tools import role_docs


def test_role_reference_is_current() -> None:
    assert role_docs.PAGE.read_text() == role_docs.render(), "run `make docs` and commit"


def test_every_role_and_variable_is_listed() -> None:
    page = role_docs.PAGE.read_text()
    for role in sorted(path for path in role_docs.ROLES.iterdir() if path.is_dir()):
        assert f"### `{role.name}`" in page
        for name in role_docs.load(role / "defaults" / "main.yml"):
            assert f"| `{name}` |" in page, f"{role.name}: {name}"
