"""The recipe of plumb's image base, checked without building: what the Dockerfile's builder
needs from it (the whole standard library, venv's pip, the C++ runtime numpy and llvmlite link
against), and a key of its own, apart from the smaller base the test image uses."""

from __future__ import annotations

import json

from plumb_dev.cluster.localnode import recipes
from tests.support.installation import REPOSITORY


def test_the_python_base_has_what_the_builder_stage_needs() -> None:
    recipe = recipes.python_base_recipe(None)
    argv = json.loads(recipe.inputs["mmdebstrap"])
    (include,) = [arg for arg in argv if arg.startswith("--include=")]
    assert set(include.removeprefix("--include=").split(",")) == {
        "python3",
        "python3-venv",
        "libstdc++6",
    }
    assert recipe.name == recipes.PYTHON_BASE
    assert recipe.key != recipes.debian_base_recipe(None).key
    assert recipe.key != recipes.python_base_recipe("http://mirror.invalid/debian").key
    # The test image's base is unchanged by the new recipe: same packages, same key inputs.
    assert "--include=python3-minimal" in json.loads(
        recipes.debian_base_recipe(None).inputs["mmdebstrap"]
    )


def test_the_dockerfile_takes_its_base_as_an_argument_and_runs_unprivileged() -> None:
    lines = (REPOSITORY / "Dockerfile").read_text().splitlines()
    assert "ARG BASE=python:3.12-slim" in lines
    assert [line for line in lines if line.startswith("FROM ")] == [
        "FROM ${BASE} AS builder",
        "FROM ${BASE}",
    ]
    assert "USER 65532:65532" in lines
    assert 'ENTRYPOINT ["plumb"]' in lines
