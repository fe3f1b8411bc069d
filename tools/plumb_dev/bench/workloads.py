"""The workloads, modelled on Kubernetes' scheduler_perf: one small declarative entry each.

A workload says how many nodes, initial pods (created already bound, spread round-robin over the
nodes) and measured pods (created pending, for the scheduler under test) it has, and how a node
and a pod look: one pod shape, or a mix of pod classes taken in turn. A drain workload creates
its measured pods before the scheduler starts. A dra workload's nodes publish devices and its
pods claim one each (``draload``). Adding one is adding an entry to ``WORKLOADS``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from plumb_dev.bench import draload
from plumb_dev.testing import builders

ZONE_COUNT = 5
APP_LABEL = "app"
"""Every bench pod carries app=<workload name>: the selector of its spread and anti-affinity.
A class of a mixed workload may set its own (its spread counts only its own pods)."""
CLASS_LABEL = "bench.plumb.dev/class"
"""The pod class of a mixed workload's pods, by which the placement is assessed per class."""


def zone_of(index: int) -> str:
    """Node index → zone: round-robin, so any run of ZONE_COUNT consecutive nodes covers all."""
    return f"zone-{index % ZONE_COUNT}"


NodeShape = Callable[[builders.NodeBuilder, int], builders.NodeBuilder]
PodShape = Callable[[builders.PodBuilder], builders.PodBuilder]
PodClass = tuple[str, PodShape]
"""A class of a mixed workload: its name (the CLASS_LABEL value) and its shape."""


def _plain_node(node: builders.NodeBuilder, index: int) -> builders.NodeBuilder:
    # scheduler_perf's node-default.yaml: 4 cpu, 32Gi, 110 pods; every node in a zone.
    return node.capacity(cpu="4", memory="32Gi", pods="110").zone(zone_of(index))


def _plain_pod(pod: builders.PodBuilder) -> builders.PodBuilder:
    # scheduler_perf's pod-default.yaml requests.
    return pod.req(cpu="100m", memory="500Mi")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Workload:
    """One benchmark scenario; the shapes decorate the builders the runner creates."""

    name: str
    description: str
    nodes: int
    initial_pods: int
    measured_pods: int
    node: NodeShape = _plain_node
    pod: PodShape = _plain_pod
    mix: tuple[PodClass, ...] = ()
    """When set, instead of ``pod``: the pod with global index i (initial pods first, then the
    measured ones) is of class mix[i % len(mix)], so the classes interleave."""
    drain: bool = False
    """The measured pods are created, and seen pending, before the scheduler starts; time runs
    from the scheduler's start."""
    dra: bool = False
    """Each node publishes draload.DEVICES in a ResourceSlice and each pod claims one device of
    draload.MATCHING: an initial pod through a claim allocated beforehand, a measured pod
    through the template, whose claims kube-controller-manager's resourceclaim controller makes
    (started for this workload's runs only)."""
    gang: int = 0
    """When set, the measured pods come in groups of this many consecutive pods, one upstream
    PodGroup each with that minCount (``gangload``): all of a group's pods placed or none."""
    trace_ratio: float | None = None
    """When set: plumb alone (no kube-scheduler, no ceiling: the comparison is plumb against
    itself), run with tracing off and on in turn (``benchruns.tracing_order``); on, at this head
    sampling ratio, its spans sent to the bench's OTLP receiver (``otlpsink``)."""
    large: bool = False
    """Only with ``--large``: minutes of runtime per scheduler."""
    xlarge: bool = False
    """Only with ``--xlarge``: tens of minutes of runtime per scheduler."""
    quick: tuple[int, int, int] = (200, 100, 300)
    """(nodes, initial pods, measured pods) in quick mode."""

    def __post_init__(self) -> None:
        if self.nodes <= 0 or self.initial_pods < 0 or self.measured_pods <= 0:
            raise ValueError(
                f"workload {self.name!r}: nodes={self.nodes}, initial_pods={self.initial_pods}, "
                f"measured_pods={self.measured_pods}; need nodes > 0, initial >= 0, measured > 0"
            )
        if self.dra and self.drain:
            raise ValueError(
                f"workload {self.name!r}: a drain's pods would wait for their claims before "
                f"the scheduler starts; dra and drain do not go together"
            )
        sizes = ((self.nodes, self.initial_pods, self.measured_pods), self.quick)
        for nodes, initial, measured in sizes if self.dra else ():
            if initial + measured > draload.capacity(nodes):
                raise ValueError(
                    f"workload {self.name!r}: {initial} initial and {measured} measured pods "
                    f"need a device each; {nodes} nodes have {draload.capacity(nodes)} that "
                    f"the template's selector accepts"
                )

        for _, _, measured in sizes if self.gang else ():
            if measured % self.gang:
                raise ValueError(
                    f"workload {self.name!r}: {measured} measured pods do not make whole groups "
                    f"of {self.gang}"
                )

    def shape(self, pod_index: int) -> PodShape:
        """The shape of the pod_index-th pod (initial pods first), with its class label."""
        if not self.mix:
            return self.pod
        name, shape = self.mix[pod_index % len(self.mix)]
        return lambda pod: shape(pod.label(CLASS_LABEL, name))

    def class_of(self, pod_index: int) -> str | None:
        """The class name of the pod_index-th pod, None for a workload of one shape."""
        return self.mix[pod_index % len(self.mix)][0] if self.mix else None

    def quick_variant(self) -> Workload:
        nodes, initial, measured = self.quick
        return dataclasses.replace(self, nodes=nodes, initial_pods=initial, measured_pods=measured)

    def ceiling_node(self, pod_index: int) -> int:
        """The node index the raw binder gives the pod_index-th pod (initial pods first).

        Round-robin continues where the initial pods stopped, which keeps every built-in
        workload's constraints (zone skew, one pod per host) without computing anything.
        """
        return pod_index % self.nodes


def _gang_member(pod: builders.PodBuilder) -> builders.PodBuilder:
    # A training worker: a whole cpu, so that 8 of them fill two nodes of 4.
    return pod.req(cpu="1", memory="2Gi")


def _zone_spread(pod: builders.PodBuilder) -> builders.PodBuilder:
    return _plain_pod(pod).spread(
        builders.ZONE_LABEL, 1, when="DoNotSchedule", selector={APP_LABEL: "zone-spread"}
    )


def _anti_affinity(pod: builders.PodBuilder) -> builders.PodBuilder:
    return _plain_pod(pod).affinity(
        builders.HOSTNAME_LABEL, {APP_LABEL: "anti-affinity"}, anti=True
    )


def _preferred_affinity(pod: builders.PodBuilder) -> builders.PodBuilder:
    return _plain_pod(pod).preferred_node_affinity(
        100, builders.expr(builders.ZONE_LABEL, "In", zone_of(0))
    )


XLARGE_SPREAD_APP = "xlarge-spread"


def _own_zone_spread(pod: builders.PodBuilder) -> builders.PodBuilder:
    # Its own app label: the skew counts only the spread class, not the whole mix.
    return _plain_pod(pod.label(APP_LABEL, XLARGE_SPREAD_APP)).spread(
        builders.ZONE_LABEL, 1, when="DoNotSchedule", selector={APP_LABEL: XLARGE_SPREAD_APP}
    )


# Three classes in turn over nodes in five zones: every 15 consecutive pods (initial ones
# included) hold 5 of each class, one per zone under round-robin, which keeps the raw binder's
# spread pods even; sizes are multiples of 15 for that.
MIX: tuple[PodClass, ...] = (
    ("plain", _plain_pod),
    ("zone-spread", _own_zone_spread),
    ("preferred-affinity", _preferred_affinity),
)


BASIC = Workload(
    name="basic",
    description="SchedulingBasic: plain pods of 100m / 500Mi",
    nodes=500,
    initial_pods=500,
    measured_pods=2000,
)
TRACE_RATIO = 0.1
"""The head sampling ratio of the traced run: plumb's default."""


WORKLOADS: tuple[Workload, ...] = (
    BASIC,
    dataclasses.replace(
        BASIC,
        name="basic-traced",
        description=(
            f"basic with plumb's tracing on at a sampling ratio of {TRACE_RATIO:g}: the attempts "
            "kept (that share, and any failed or slow) made into spans and exported over "
            "OTLP/HTTP to a receiver in the bench process; plumb alone, run with tracing off and "
            "on in turn (see Tracing cost); this table is the traced run of median CPU"
        ),
        trace_ratio=TRACE_RATIO,
    ),
    Workload(
        name="drain",
        description="basic's pods as a backlog: all pending before the scheduler starts",
        nodes=500,
        initial_pods=500,
        measured_pods=2000,
        drain=True,
        quick=(200, 100, 300),
    ),
    Workload(
        name="zone-spread",
        description="TopologySpreading: 5 zones, maxSkew 1, DoNotSchedule",
        nodes=500,
        initial_pods=500,
        measured_pods=2000,
        pod=_zone_spread,
    ),
    Workload(
        name="anti-affinity",
        description="SchedulingPodAntiAffinity: required anti-affinity on the hostname",
        nodes=500,
        initial_pods=100,
        measured_pods=400,
        pod=_anti_affinity,
        quick=(200, 40, 160),
    ),
    Workload(
        name="preferred-affinity",
        description="SchedulingPreferredNodeAffinity: pods prefer zone-0 (weight 100)",
        nodes=500,
        initial_pods=500,
        measured_pods=2000,
        pod=_preferred_affinity,
    ),
    Workload(
        name="dra",
        description=(
            "SchedulingWithResourceClaimTemplate: 8 devices per node, each pod claims one through "
            "a template selecting by model and memory"
        ),
        nodes=500,
        initial_pods=500,
        measured_pods=2000,
        dra=True,
    ),
    Workload(
        name="gang",
        description=(
            "Gangs: upstream PodGroups (scheduling.k8s.io/v1beta1) of 8 pods of 1 cpu each, "
            "minCount 8, all or nothing"
        ),
        nodes=1000,
        initial_pods=1000,
        measured_pods=2400,
        pod=_gang_member,
        gang=8,
        quick=(200, 100, 240),
    ),
    Workload(
        name="large",
        description="SchedulingBasic at scale: 5,000 nodes, 10,000 pods",
        nodes=5000,
        initial_pods=1000,
        measured_pods=10000,
        large=True,
    ),
    Workload(
        name="xlarge",
        description="15,000 nodes, 30,000 pods: plain, zone-spread and preferred-affinity in turn",
        nodes=15000,
        initial_pods=3000,
        measured_pods=30000,
        mix=MIX,
        xlarge=True,
        quick=(1500, 300, 1500),
    ),
)


def names() -> list[str]:
    return [workload.name for workload in WORKLOADS]


def select(
    wanted: Iterable[str] | None, *, quick: bool, large: bool, xlarge: bool = False
) -> list[Workload]:
    """The workloads to run, in WORKLOADS order; quick mode shrinks each one.

    With no names given: every workload, leaving out the large ones unless large is set and the
    xlarge ones unless xlarge is set.
    """
    by_name = {workload.name: workload for workload in WORKLOADS}
    chosen: Sequence[Workload]
    if wanted is None:
        chosen = [w for w in WORKLOADS if (large or not w.large) and (xlarge or not w.xlarge)]
    else:
        requested = list(wanted)
        unknown = [name for name in requested if name not in by_name]
        if unknown:
            raise ValueError(
                f"no workload called {', '.join(map(repr, unknown))}; "
                f"choose from {', '.join(names())}"
            )
        chosen = [w for w in WORKLOADS if w.name in requested]
    return [w.quick_variant() if quick else w for w in chosen]
