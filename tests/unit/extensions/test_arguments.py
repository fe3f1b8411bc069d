"""A plugin's pluginConfig args are decoded into its Args dataclass, or refused naming the field."""

from __future__ import annotations

import pytest

from plumb.extensions import arguments
from tests.support import sample_plugins


def test_args_are_read_by_field_name_or_its_camel_case_spelling() -> None:
    args = arguments.decode(sample_plugins.RackArgs, {"label": "zone", "allowed": ["x", "y"]})
    assert args == sample_plugins.RackArgs(label="zone", allowed=("x", "y"))
    assert arguments.camel("lead_seconds") == "leadSeconds"


def test_absent_args_take_the_defaults() -> None:
    assert arguments.decode(sample_plugins.RackArgs, None) == sample_plugins.RackArgs()


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"labels": "x"}, "labels", "unknown field"),
        ({"label": 3}, "label", "must be a string, got number 3"),
        ({"allowed": "a"}, "allowed", 'must be a list, got string "a"'),
        ({"allowed": ["a", 1]}, "allowed[1]", "must be a string, got number 1"),
        ({"allowed": []}, "", "allowed: name at least one rack"),
        ([], "", "must be an object, got a list"),
    ],
)
def test_bad_args_are_refused_naming_the_field(raw: object, field: str, message: str) -> None:
    with pytest.raises(arguments.ArgsError) as caught:
        arguments.decode(sample_plugins.RackArgs, raw)
    assert (caught.value.field, caught.value.message) == (field, message)


def test_a_plugin_without_args_refuses_some() -> None:
    assert arguments.decode(None, {}) is None
    with pytest.raises(arguments.ArgsError, match="the plugin takes no args"):
        arguments.decode(None, {"x": 1})


def test_canonical_args_do_not_depend_on_key_order() -> None:
    assert arguments.canonical({"b": 1, "a": [2]}) == arguments.canonical({"a": [2], "b": 1})
