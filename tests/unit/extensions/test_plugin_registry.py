"""Installed plugins are found by entry point; one that cannot be used says why."""

from __future__ import annotations

from plumb.extensions import interface, registry
from tests.support import sample_plugins


def test_a_plugins_points_are_the_methods_it_defines() -> None:
    found = registry.of(sample_plugins.RackFilter, sample_plugins.Gatekeeper)
    assert found.plugins["RackFilter"].points == (interface.FILTER,)
    assert found.plugins["Gatekeeper"].points == (
        interface.PRE_FILTER,
        interface.RESERVE,
        interface.PERMIT,
        interface.PRE_BIND,
    )
    assert found.config_points()["Gatekeeper"] == {"preFilter", "reserve", "permit", "preBind"}


class _Nameless(interface.Plugin):
    def filter(self, pod: interface.PodView, nodes: interface.NodeView) -> None:
        return None


class _Pointless(interface.Plugin):
    name = "Pointless"


class _Taken(interface.Plugin):
    name = "NodeAffinity"

    def filter(self, pod: interface.PodView, nodes: interface.NodeView) -> None:
        return None


class _Odd(interface.Plugin):
    name = "Odd"
    normalize = "Squared"

    def score(self, pod: interface.PodView, nodes: interface.NodeView) -> None:
        return None


def test_an_unusable_plugin_is_listed_with_its_problem_and_cannot_be_enabled() -> None:
    builtin = {"NodeAffinity"}
    problems = {
        registry.examine(cls, "m:C", "dist", "1", builtin).problem
        for cls in (_Nameless, _Pointless, _Taken, _Odd, int)
    }
    assert problems == {
        "sets no name",
        "implements no extension point",
        "takes the name of kube-scheduler's in-tree plugin NodeAffinity",
        "normalize is 'Squared', not one of AsIs, Highest, Reversed",
        "is not a subclass of plumb.extensions.interface.Plugin",
    }
    assert registry.of(_Pointless).usable() == {}


def test_the_version_is_the_plugins_own_else_its_distributions() -> None:
    assert registry.examine(sample_plugins.RackFilter, "m:C", "d", "9.9").version == "1.0"
    assert registry.examine(_Odd, "m:C", "d", "9.9").problem
