"""What kube-scheduler's KubeSchedulerConfiguration gained or lost from v1.34 to v1.37, one row
per change, and the queries that give each release's extension points, plugins, defaults and
argument fields from v1.34.4's (plugins.py, args.py, decoding.py hold v1.34.4's as they are).

Each row was read in k8s.io/kubernetes@v1.3N.x (v1.34.4, v1.35.4, v1.36.3, v1.37.2):
``pkg/scheduler/apis/config/`` (types.go, v1/default_plugins.go, v1/defaults.go,
validation/), ``pkg/scheduler/framework/plugins/registry.go`` and each plugin's methods,
``framework/runtime/framework.go``, and k8s.io/kube-scheduler's ``config/v1``. A gate a row
names is read through ``Emulation.gate``: the gates of ``emulation.GATES`` with the release's
defaults (or ``--feature-gates``); any other gate is off in every release of the window
(``UNHONOURED_GATES``), so plumb takes it as off. docs/versions.md has the table for people.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

from plumb.framework import emulation
from plumb.framework.schedconfig import decoding

POINT = "extension point"
PLUGIN = "plugin"
RUNS_AT = "runs at"
DEFAULT = "default plugin"
ORDER = "default order"
ARGS_FIELD = "args field"
BEHAVIOUR = "behaviour"

APPEND = ""
"""``Revision.before`` of a default appended after the last one."""

# BEHAVIOUR rows, read with ``applies``.
FIT_RATIO_BY_TYPE = "fit-ratio-by-type"
SCORE_WEIGHT_PREFIX = "score-weight-prefix"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Revision:
    """One change of the configuration in release v1.``minor``.

    - POINT: extension point ``name`` (a field of ``plugins``) for plugins of Go interface
      ``interface``; ``validated``: validation refuses removed plugins there;
      ``default_args``: a plugin enabled there gets its default args (pluginsNames).
    - PLUGIN: plugin ``name`` enters the registry, running at ``points``; ``inert``: why it
      changes nothing under the gates plumb runs with.
    - RUNS_AT: plugin ``name`` runs at ``points`` from then on (``added`` False: no more).
    - DEFAULT: plugin ``name`` in the default multiPoint set when ``gate`` is on ("" always),
      with ``weight``, inserted ``before`` that plugin (APPEND: last); ``added`` False takes
      it out. The newest DEFAULT row of a plugin replaces its older ones.
    - ORDER: default plugin ``name`` moves to just ``before`` another.
    - ARGS_FIELD: ``name`` is ``Plugin.field``, a field of the plugin's args of Go type
      ``schema`` (a decoding scalar); ``default_ns`` its default (nanoseconds, for a
      duration) when ``gate`` and ``also_gate`` are on.
    - BEHAVIOUR: a change of validation or wording named ``name``, read with ``applies``.
    """

    minor: int
    kind: str
    name: str
    source: str
    note: str = ""
    added: bool = True
    interface: str = ""
    validated: bool = False
    default_args: bool = False
    points: tuple[str, ...] = ()
    inert: str = ""
    gate: str = ""
    also_gate: str = ""
    weight: int = 0
    before: str = APPEND
    schema: str = ""
    default_ns: int | None = None

    @property
    def field(self) -> str:
        """ARGS_FIELD: the field's name (``bindingTimeout``)."""
        return self.name.partition(".")[2]

    @property
    def plugin(self) -> str:
        """ARGS_FIELD: the plugin whose args hold the field."""
        return self.name.partition(".")[0]


_TYPES = "apis/config/types.go, kube-scheduler config/v1/types.go"
_DEFAULTS = "apis/config/v1/default_plugins.go"
_REGISTRY = "framework/plugins/registry.go"
_FRAMEWORK = "framework/runtime/framework.go"
_WORKLOADS = "it acts only on pods of a workload's pod group (gate {gate}, off)"

REVISIONS: tuple[Revision, ...] = (
    # v1.35 ---------------------------------------------------------------------------------
    Revision(
        minor=35,
        kind=PLUGIN,
        name="NodeDeclaredFeatures",
        points=("preFilter", "filter"),
        source=_REGISTRY,
        note="rejects nodes whose status.declaredFeatures lack what the pod needs",
    ),
    Revision(
        minor=35,
        kind=DEFAULT,
        name="NodeDeclaredFeatures",
        gate="NodeDeclaredFeatures",
        source=_DEFAULTS,
        note="appended after DefaultBinder (alpha, off; on from v1.36)",
    ),
    Revision(
        minor=35,
        kind=PLUGIN,
        name="GangScheduling",
        points=("preEnqueue", "reserve", "permit"),
        inert=_WORKLOADS.format(gate="GenericWorkload"),
        source=_REGISTRY,
        note="holds a pod group's pods until its minimum count can be placed",
    ),
    Revision(
        minor=35,
        kind=DEFAULT,
        name="GangScheduling",
        gate="GangScheduling",
        source=_DEFAULTS,
        note="appended (alpha, off)",
    ),
    Revision(
        minor=35,
        kind=RUNS_AT,
        name="DynamicResources",
        points=("score",),
        source="framework/plugins/dynamicresources/dynamicresources.go",
        note="scores nodes by the allocated devices a claim prefers; 0 for pods without claims",
    ),
    Revision(
        minor=35,
        kind=DEFAULT,
        name="DynamicResources",
        weight=2,
        before="DefaultPreemption",
        source=_DEFAULTS,
        note="its score weighs 2 (v1.34: no score)",
    ),
    Revision(
        minor=35,
        kind=ARGS_FIELD,
        name="DynamicResources.bindingTimeout",
        schema=decoding.DURATION,
        gate="DRADeviceBindingConditions",
        also_gate="DRAResourceClaimDeviceStatus",
        default_ns=600_000_000_000,
        source="apis/config/v1/defaults.go, validation/validation_pluginargs.go",
        note=(
            "how long PreBind waits for device binding conditions: 10m0s by default and at "
            "least 1s with both gates on; Forbidden with either off"
        ),
    ),
    # v1.36 ---------------------------------------------------------------------------------
    Revision(
        minor=36,
        kind=POINT,
        name="placementGenerate",
        interface="PlacementGeneratePlugin",
        default_args=True,
        source=_TYPES + ", " + _FRAMEWORK,
        note="the placements a pod group may take (at most one plugin)",
    ),
    Revision(
        minor=36,
        kind=POINT,
        name="placementScore",
        interface="PlacementScorePlugin",
        default_args=True,
        source=_TYPES + ", " + _FRAMEWORK,
        note="ranks a pod group's placements; weights as at score",
    ),
    Revision(
        minor=36,
        kind=PLUGIN,
        name="TopologyPlacementGenerator",
        points=("placementGenerate",),
        inert=_WORKLOADS.format(gate="TopologyAwareWorkloadScheduling"),
        source=_REGISTRY,
        note="one placement per domain of the pod group's topology key",
    ),
    Revision(
        minor=36,
        kind=PLUGIN,
        name="PodGroupPodsCount",
        points=("placementScore",),
        inert=_WORKLOADS.format(gate="TopologyAwareWorkloadScheduling"),
        source=_REGISTRY,
        note="prefers placements holding more of the group's pods",
    ),
    Revision(
        minor=36,
        kind=RUNS_AT,
        name="NodeResourcesFit",
        points=("placementScore",),
        source="framework/plugins/noderesources/fit.go",
        note="scores a pod group's placements with its scoring strategy",
    ),
    Revision(
        minor=36,
        kind=RUNS_AT,
        name="GangScheduling",
        points=("reserve",),
        added=False,
        source="framework/plugins/gangscheduling/gangscheduling.go",
        note="no Reserve any more",
    ),
    Revision(
        minor=36,
        kind=DEFAULT,
        name="TopologyPlacementGenerator",
        gate="TopologyAwareWorkloadScheduling",
        source=_DEFAULTS,
        note="appended (alpha, off)",
    ),
    Revision(
        minor=36,
        kind=DEFAULT,
        name="PodGroupPodsCount",
        gate="TopologyAwareWorkloadScheduling",
        weight=1,
        source=_DEFAULTS,
        note="appended (alpha, off)",
    ),
    Revision(
        minor=36,
        kind=BEHAVIOUR,
        name=FIT_RATIO_BY_TYPE,
        source="apis/config/validation/validation_pluginargs.go",
        note=(
            "NodeResourcesFitArgs: RequestedToCapacityRatio requires requestedToCapacityRatio "
            "(v1.34, v1.35: a panic), other types forbid it, and its shape is named "
            "scoringStrategy.requestedToCapacityRatio.shape (before: scoringStrategy.shape)"
        ),
    ),
    Revision(
        minor=36,
        kind=BEHAVIOUR,
        name=SCORE_WEIGHT_PREFIX,
        source=_FRAMEWORK,
        note='the score weights\' overflow error starts "score plugins: "',
    ),
    # v1.37 ---------------------------------------------------------------------------------
    Revision(
        minor=37,
        kind=POINT,
        name="podGroupPostFilter",
        interface="PodGroupPostFilterPlugin",
        validated=True,
        source=_TYPES + ", " + _FRAMEWORK + ", apis/config/validation/validation.go",
        note=(
            "after a pod group cannot be placed; its plugins get no default args (pluginsNames "
            "leaves it out)"
        ),
    ),
    Revision(
        minor=37,
        kind=RUNS_AT,
        name="DefaultPreemption",
        points=("podGroupPostFilter",),
        source="framework/plugins/defaultpreemption/default_preemption.go",
        note="preempts for a pod group (gate GenericWorkload, off)",
    ),
    Revision(
        minor=37,
        kind=RUNS_AT,
        name="DynamicResources",
        points=("podGroupPostFilter",),
        source="framework/plugins/dynamicresources/dynamicresources.go",
        note="frees devices for a pod group (gate GenericWorkload, off)",
    ),
    *(
        Revision(
            minor=37,
            kind=RUNS_AT,
            name=plugin,
            points=("preFilter",),
            source=f"framework/plugins/{plugin.lower()}/",
            note="skips pods whose resize is deferred (gate "
            "InPlacePodVerticalScalingSchedulerPreemption, off); nothing else",
        )
        for plugin in ("NodeName", "NodeUnschedulable", "TaintToleration")
    ),
    Revision(
        minor=37,
        kind=PLUGIN,
        name="DeferredPodScheduling",
        points=("preFilter", "filter", "permit"),
        inert=(
            "it acts only on pods whose resize is deferred (gate "
            "InPlacePodVerticalScalingSchedulerPreemption, off)"
        ),
        source=_REGISTRY,
        note="holds a pod whose in-place resize waits for preemption",
    ),
    Revision(
        minor=37,
        kind=DEFAULT,
        name="DeferredPodScheduling",
        gate="InPlacePodVerticalScalingSchedulerPreemption",
        before="NodeResourcesFit",
        source=_DEFAULTS,
        note="inserted before NodeResourcesFit (alpha, off)",
    ),
    Revision(
        minor=37,
        kind=DEFAULT,
        name="GangScheduling",
        gate="GenericWorkload",
        source=_DEFAULTS,
        note="appended under GenericWorkload (beta, off); the GangScheduling gate is gone",
    ),
    Revision(
        minor=37,
        kind=ORDER,
        name="NodeName",
        before="NodeUnschedulable",
        source=_DEFAULTS,
        note="NodeName runs before NodeUnschedulable",
    ),
)
"""Every change, in release order."""

UNHONOURED_GATES: Mapping[str, str] = {
    "GangScheduling": "alpha, off in v1.35 and v1.36; gone in v1.37",
    "GenericWorkload": "alpha, off from v1.35; beta, off in v1.37",
    "TopologyAwareWorkloadScheduling": "alpha, off from v1.36",
    "InPlacePodVerticalScalingSchedulerPreemption": "alpha, off in v1.37",
}
"""Gates the rows name that plumb does not honour (not in emulation.GATES): off by default in
every release of the window, and so off for plumb."""


def rows(kind: str, minor: int = emulation.NEWEST) -> Iterator[Revision]:
    """The rows of ``kind`` of releases up to v1.``minor``, in release order."""
    return (row for row in REVISIONS if row.kind == kind and row.minor <= minor)


def applies(behaviour: str, minor: int) -> bool:
    """Whether the BEHAVIOUR row ``behaviour`` is in force in v1.``minor``."""
    return any(row.name == behaviour for row in rows(BEHAVIOUR, minor))


def later(kind: str, name: str, minor: int) -> Revision | None:
    """The first row of ``kind`` named ``name`` that adds it after v1.``minor`` (for a plugin,
    a point or an args field that release does not have yet)."""
    return next(
        (
            row
            for row in REVISIONS
            if row.kind == kind and row.name == name and row.added and row.minor > minor
        ),
        None,
    )


def later_point_of(plugin: str, point: str, minor: int) -> Revision | None:
    """The first PLUGIN or RUNS_AT row after v1.``minor`` that has ``plugin`` run at
    ``point``."""
    return next(
        (
            row
            for row in REVISIONS
            if row.kind in (PLUGIN, RUNS_AT)
            and row.name == plugin
            and row.added
            and point in row.points
            and row.minor > minor
        ),
        None,
    )


def gates_on(row: Revision, kube: emulation.Emulation) -> bool:
    """Whether the row's gates (none: always) are on under ``kube``."""
    return all(kube.gate(gate) for gate in (row.gate, row.also_gate) if gate)
