"""One name for each thing: no module name appears twice, and no class is defined twice, in the
scheduler (operator/plumb), the tooling (tools/plumb_dev) or the tests."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
TREES = (
    REPOSITORY / "operator" / "plumb",
    REPOSITORY / "tools" / "plumb_dev",
    REPOSITORY / "tests",
)
# Names Python or pytest give a fixed meaning, one per package.
PER_PACKAGE = {"__init__.py", "__main__.py", "conftest.py"}


def _modules() -> list[Path]:
    return sorted(
        path
        for tree in TREES
        for path in tree.rglob("*.py")
        if "__pycache__" not in path.parts and path.name not in PER_PACKAGE
    )


def _repeated(where: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: places for name, places in where.items() if len(places) > 1}


def test_no_module_name_appears_twice() -> None:
    where: dict[str, list[str]] = collections.defaultdict(list)
    for path in _modules():
        where[path.stem].append(str(path.relative_to(REPOSITORY)))
    assert len(where) > 300  # the scan sees the whole repository
    assert not _repeated(where)


def test_no_class_is_defined_twice() -> None:
    where: dict[str, list[str]] = collections.defaultdict(list)
    for path in _modules():
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(REPOSITORY)}:{node.lineno}")
    assert "Scheduler" in where  # the scan reads class definitions
    assert not _repeated(where)
