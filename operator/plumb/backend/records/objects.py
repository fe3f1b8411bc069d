"""Pod and Node bodies from the API turned into the compact records the cache and queue keep."""

from __future__ import annotations

import dataclasses
import datetime
import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from plumb.backend.records import draobjects, specs
from plumb.k8s import quantities

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"
# Columns every NodeTable has, in this order; extended resources get columns as they are seen.
BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# kube-scheduler's defaults for a container that requests no cpu / memory, used when scoring.
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024
_NONZERO_DEFAULTS = {CPU: DEFAULT_MILLI_CPU, MEMORY: DEFAULT_MEMORY}
_EMPTY: Mapping[str, int] = MappingProxyType({})
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
GUARANTEED, BURSTABLE, BEST_EFFORT = "Guaranteed", "Burstable", "BestEffort"
QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)
_QOS_RESOURCES = (CPU, MEMORY)
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
# The kubelet's condition on a pod whose in-place resize waits, and its reason when the node
# can never give it.
RESIZE_PENDING = "PodResizePending"
RESIZE_INFEASIBLE = "Infeasible"
_EMPTY_LABELS: Mapping[str, str] = MappingProxyType({})
_EMPTY_NAMES: Mapping[str, str] = MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True)
class PodClaim:
    """A PersistentVolumeClaim a pod's volume names: ``spec.volumes[].persistentVolumeClaim``,
    or a generic ephemeral volume, whose claim is ``<pod>-<volume>`` and must be the pod's own."""

    name: str
    ephemeral: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ContainerDeviceRequests:
    """What one container asks of resources a DeviceClass may back (extended resources and
    classes' implicit names, DRAExtendedResource), as kube-scheduler names the requests of the
    claim it makes for them: ``index`` counts init containers, then app containers;
    ``requests`` holds (resource, its place among the container's request names sorted,
    count). ``init``: an init container that runs to completion (not a sidecar)."""

    index: int
    name: str
    init: bool
    requests: tuple[tuple[str, int, int], ...]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ResizeAccounting:
    """How a pod's status counts in its requests, as the release plumb decides as has it
    (component-helpers resource/helpers.go PodRequests; InPlacePodVerticalScaling, which
    reads the status at all, is on in every release plumb follows).

    ``pod_totals`` (v1.37, #140047): a pod being resized counts the largest of its spec,
    actuated and allocated totals (each summed over the containers as the spec is); before,
    each container counted the largest of its own three (restartable init containers alone
    among the init containers). ``pod_level_status`` (gate
    InPlacePodLevelResourcesVerticalScaling, v1.35 alpha, on from v1.36): pod-level requests
    read from status.resources and status.allocatedResources too, and from v1.37 those
    pod-level totals stand for the containers' when both are reported.
    """

    pod_totals: bool = True
    pod_level_status: bool = True


NEWEST_RESIZE = ResizeAccounting()
"""kube-scheduler v1.37's with its default gates."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PodInfo:
    """What scheduling needs of a pod; the rest of its body is not kept.

    ``requests`` is the pod's effective request (cpu in millicores, other resources in their
    base unit) and never includes ``pods``: each pod counts one against a node's pod limit.
    ``problem`` is set when the spec cannot be scheduled as written (an unusable quantity);
    such a pod gets a FailedScheduling event that quotes it.

    Equality ignores ``resource_version`` and ``scheduled_condition``: as in kube-scheduler, a
    change to the pod's status alone is not an update that could make it schedulable.
    """

    uid: str
    namespace: str
    name: str
    scheduler_name: str
    node_name: str
    priority: int
    creation_timestamp: str
    resource_version: str = dataclasses.field(compare=False)
    requests: Mapping[str, int]
    # (cpu, memory) the pod adds to its node's non-zero requests, which LeastAllocated and
    # MostAllocated read: 100m / 200Mi for containers asking nothing (see nonzero_pair).
    nonzero: tuple[int, int] = (DEFAULT_MILLI_CPU, DEFAULT_MEMORY)
    # (cpu, memory) those scorers count for this pod while it is the one being scheduled, when
    # that differs from ``nonzero`` (pod-level requests, which they leave out, or a status
    # that counts: see scoring_pair); None: the same. Read it through ``scored_nonzero``.
    nonzero_incoming: tuple[int, int] | None = None
    terminal: bool
    deleting: bool
    gated: bool
    labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY_LABELS)
    scheduling: specs.Scheduling = specs.NO_CONSTRAINTS
    # (kind, name) of the controller owning the pod, for the default spread constraints.
    owner: tuple[str, str] | None = None
    # The image of every init and app container, normalised as ImageLocality matches them
    # (":latest" added to a name without a tag), interned: replicas share the strings.
    images: tuple[str, ...] = ()
    # The image of every image volume (spec.volumes[].image.reference), normalised and
    # interned as ``images``: ImageLocality counts them from v1.36.
    image_volumes: tuple[str, ...] = ()
    # The node features the spec needs (NEEDED_FEATURES: what component-helpers'
    # nodedeclaredfeatures infers for scheduling); NodeDeclaredFeatures requires those its
    # release knows of.
    needed_features: frozenset[str] = frozenset()
    problem: str | None = None
    # (status, reason, message) of the PodScheduled condition, to skip patches that change nothing.
    scheduled_condition: tuple[str, str, str] | None = dataclasses.field(
        default=None, compare=False
    )
    # What preemption reads. spec.preemptionPolicy (the Priority admission plugin copies the
    # PriorityClass's); the QoS class (status.qosClass, else computed from the spec).
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    qos: str = BURSTABLE
    # Status, so not compared (a status change alone is no update): status.nominatedNodeName,
    # status.startTime (RFC 3339, "" before the kubelet starts it) and whether the pod carries
    # DisruptionTarget=True with reason PreemptionByScheduler (a victim being preempted).
    nominated_node: str = dataclasses.field(default="", compare=False)
    start_time: str = dataclasses.field(default="", compare=False)
    preempted: bool = dataclasses.field(default=False, compare=False)
    # The claims of its volumes, in spec order (the volume plugins read them).
    claims: tuple[PodClaim, ...] = ()
    # Its DRA claims (spec.resourceClaims, in order) and the claims the resourceclaim
    # controller made for those from templates (status.resourceClaimStatuses: pod claim name
    # -> claim name, "" when none is needed). The status is compared all the same: a pod waits
    # until the controller writes it (DynamicResources' PreEnqueue), and that write is the
    # update that lets it in.
    resource_claims: tuple[draobjects.PodResourceClaim, ...] = ()
    claim_statuses: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY_NAMES)
    # metadata.generation: the API server counts each change of the spec in it, but not a
    # binding (nor a label or status change); 0 where it is not set. Not compared: equal
    # generations mean the spec-derived fields above are equal.
    generation: int = dataclasses.field(default=0, compare=False)
    # Whether the status took part in ``requests`` (it reports the containers' or the pod's
    # resources, or a resize pending; see ResizeAccounting): a status change then reads them
    # again. Not compared: ``requests`` is.
    status_resources: bool = dataclasses.field(default=False, compare=False)
    # Its containers' requests a DeviceClass may back, for the claim kube-scheduler makes
    # when devices serve them (empty for most pods).
    device_requests: tuple[ContainerDeviceRequests, ...] = ()
    # spec.schedulingGroup.podGroupName: the upstream PodGroup it belongs to (immutable), ""
    # when none (scheduler-plugins' groups are named by a label: groupobjects.group_of).
    pod_group: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def resource_claim_names(self) -> tuple[str, ...]:
        """The names of the DRA claims it uses, as far as known (resourceclaim.Name): each
        named claim, and each template's claim once status.resourceClaimStatuses names it."""
        if not self.resource_claims:
            return ()
        names = []
        for entry in self.resource_claims:
            if entry.claim_name:
                names.append(entry.claim_name)
            elif entry.template_name and self.claim_statuses.get(entry.name):
                names.append(self.claim_statuses[entry.name])
        return tuple(names)

    @property
    def scored_nonzero(self) -> tuple[int, int]:
        """(cpu, memory) NodeResourcesFit's scorers add for this pod when it is scheduled."""
        return self.nonzero if self.nonzero_incoming is None else self.nonzero_incoming


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class NodeInfo:
    """What scheduling needs of a node: name, allocatable, labels, taints, cordon, and the
    images it holds (``images``: (name, size in bytes) for every name of every image of
    status.images, names interned: thousands of nodes share the strings), and the features
    it declares."""

    name: str
    allocatable: Mapping[str, int]
    labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY_LABELS)
    taints: tuple[specs.Taint, ...] = ()
    unschedulable: bool = False
    problem: str | None = None
    images: tuple[tuple[str, int], ...] = ()
    # status.declaredFeatures: the features the kubelet says the node has (sorted, as the
    # API server requires; NodeDeclaredFeatures' filter reads them).
    declared_features: tuple[str, ...] = ()
    # metadata.annotations: what Python plugins may read (extensions/interface.py NodeView).
    annotations: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY_LABELS)


def amount(resource: str, text: Any) -> int:
    """One quantity in the unit the cache counts it in: millicores for cpu, else the base unit."""
    if resource == CPU:
        return quantities.clamp_int64(quantities.milli_value(text))
    return quantities.clamp_int64(quantities.value(text))


def _resource_list(raw: Mapping[str, Any] | None) -> dict[str, int]:
    return {name: amount(name, text) for name, text in (raw or {}).items()}


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _maximise(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, 0), value)


def pod_level_resource(name: str) -> bool:
    """Whether ``spec.resources`` may set ``name``: cpu, memory and hugepages-* only
    (component-helpers resource.IsSupportedPodLevelResource; the API server refuses others)."""
    return name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX)


def _pod_level_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """The pod-level requests that override the containers' (empty: none are set, as
    IsPodLevelRequestsSet says; an unsupported name alone does not count as set)."""
    raw = (spec.get("resources") or {}).get("requests") or {}
    return {name: amount(name, text) for name, text in raw.items() if pod_level_resource(name)}


def _requests(
    spec: Mapping[str, Any],
    defaults: Mapping[str, int],
    status: Mapping[str, Any] | None = None,
    resize: ResizeAccounting = NEWEST_RESIZE,
) -> dict[str, int]:
    """component-helpers' PodRequests, keeping every resource named (even at zero: whether a
    request is set at all decides the non-zero defaults).

    max(sum of containers + restartable init containers, each init container run on top of the
    restartable init containers started before it); then each pod-level request replaces that
    total for its resource; then the overhead is added. ``defaults`` fill in the resources a
    container does not name (NonMissingContainerRequests), before the pod-level override.
    ``status``: the pod's, when it reports resources (``reads_status``): read as ``resize``
    says.
    """
    if status is None:
        total = _aggregate(spec, defaults, _spec_requests)
    elif resize.pod_totals:
        total = _largest_totals(spec, defaults, status, resize)
    else:
        total = _aggregate(spec, defaults, _largest_per_container(status))
    pod_level = _pod_level_requests(spec)
    if pod_level:
        total.update(_pod_level_effective(spec, pod_level, status, resize))
    _add(total, _resource_list(spec.get("overhead")))
    return total


ContainerRequests = Callable[[Mapping[str, Any], bool], "Mapping[str, int] | None"]
"""What one container counts (the container, whether it is an init container); None:
nothing (a resize found infeasible drops the spec)."""


def _spec_requests(container: Mapping[str, Any], _init: bool = False) -> Mapping[str, int]:
    return _resource_list((container.get("resources") or {}).get("requests"))


def _restartable(container: Mapping[str, Any]) -> bool:
    """A restartable init container (a sidecar): it runs beside the app containers."""
    return container.get("restartPolicy") == "Always"


def _aggregate(
    spec: Mapping[str, Any], defaults: Mapping[str, int], requests_of: ContainerRequests
) -> dict[str, int]:
    """The containers' total, each container counting ``requests_of`` it with ``defaults``
    for the resources it does not name (aggregateContainerResourcesByFn)."""

    def listed(container: Mapping[str, Any], init: bool) -> dict[str, int]:
        found = dict(requests_of(container, init) or {})
        for name, default in defaults.items():
            found.setdefault(name, default)
        return found

    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add(total, listed(container, False))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        requests = listed(container, True)
        if _restartable(container):
            _add(total, requests)
            _add(sidecars, requests)
            _maximise(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
            _maximise(init_peak, running)
    _maximise(total, init_peak)
    return total


def reads_status(status: Mapping[str, Any]) -> bool:
    """Whether a pod's status takes part in its requests: it reports the resources of a
    container or of the pod, or a resize pending. Otherwise they are the spec's in every
    release."""
    if status.get("resources") is not None or status.get("allocatedResources") is not None:
        return True
    for key in ("containerStatuses", "initContainerStatuses"):
        for container in status.get(key) or ():
            if container.get("resources") is not None:
                return True
            if container.get("allocatedResources") is not None:
                return True
    return any(
        condition.get("type") == RESIZE_PENDING for condition in status.get("conditions") or ()
    )


def _infeasible(status: Mapping[str, Any]) -> bool:
    """Whether the kubelet found the pod's resize infeasible (IsPodResizeInfeasible): then
    the spec's requests do not count, only what is actuated and allocated."""
    for condition in status.get("conditions") or ():
        if condition.get("type") == RESIZE_PENDING:
            return bool(condition.get("reason") == RESIZE_INFEASIBLE)
    return False


def _container_statuses(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Container statuses by name (an app container's first, as findContainerStatus)."""
    found: dict[str, Mapping[str, Any]] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or ():
            found[str(container.get("name", ""))] = container
    return found


def _largest(*lists: Mapping[str, int] | None) -> dict[str, int]:
    """component-helpers' max: per resource the largest of the lists naming it."""
    out: dict[str, int] = {}
    for listed in lists:
        _maximise(out, listed or {})
    return out


def _largest_per_container(status: Mapping[str, Any]) -> ContainerRequests:
    """Up to v1.36: each app and restartable init container whose status reports its
    resources counts the largest of its spec, actuated (status resources) and allocated
    requests (determineEffectiveRequests; the spec left out when the resize is infeasible)."""
    statuses, infeasible = _container_statuses(status), _infeasible(status)

    def requests_of(container: Mapping[str, Any], init: bool) -> Mapping[str, int]:
        spec = _spec_requests(container)
        running = not init or _restartable(container)
        found = statuses.get(str(container.get("name", ""))) if running else None
        if found is None or found.get("resources") is None:
            return spec
        return _largest(
            None if infeasible else spec,
            _resource_list(found["resources"].get("requests")),
            _resource_list(found.get("allocatedResources")),
        )

    return requests_of


def pod_requests(
    spec: Mapping[str, Any],
    status: Mapping[str, Any] | None = None,
    resize: ResizeAccounting = NEWEST_RESIZE,
) -> dict[str, int]:
    """The pod's effective request (PodLevelResources on, its default from v1.34): the
    containers' requests, replaced per resource by ``spec.resources.requests`` where the pod
    sets them, plus the overhead; zeros dropped. ``status`` (when ``reads_status``) as
    ``resize`` says: a pod being resized in place counts what it asks, runs with and was
    given."""
    total = _requests(spec, _EMPTY, status, resize)
    total.pop(PODS, None)
    # Each quantity fits int64 but a sum may not; the cache keeps int64s.
    return {name: quantities.clamp_int64(value) for name, value in total.items() if value}


def _pair(counted: Mapping[str, int]) -> tuple[int, int]:
    return (
        quantities.clamp_int64(counted.get(CPU, 0)),
        quantities.clamp_int64(counted.get(MEMORY, 0)),
    )


def nonzero_pair(
    spec: Mapping[str, Any],
    status: Mapping[str, Any] | None = None,
    resize: ResizeAccounting = NEWEST_RESIZE,
) -> tuple[int, int]:
    """(cpu millicores, memory bytes) the pod adds to its node's non-zero requests, which
    NodeResourcesFit's scorers read (framework.PodInfo.CalculateResource).

    A container that names no cpu (memory) request counts 100m (200Mi). With pod-level
    requests set, only a resource that neither a container, the pod level nor the overhead
    names gets the default (getNonMissingContainerRequests): a pod-level memory request and
    one container asking 500m cpu beside one asking none count 500m, not 600m.
    """
    requests = _requests(spec, _EMPTY, status, resize)
    defaults: Mapping[str, int] = _NONZERO_DEFAULTS
    if _pod_level_requests(spec):
        defaults = {name: value for name, value in defaults.items() if name not in requests}
    return _pair(_requests(spec, defaults, status, resize) if defaults else requests)


def scoring_pair(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(cpu millicores, memory bytes) NodeResourcesFit's scorer counts for the pod being
    scheduled (resourceAllocationScorer.calculatePodResourceRequest): every container that
    names no cpu (memory) request counts 100m (200Mi), plus the overhead. Pod-level requests
    and the status do not count: Fit builds its scorer without the PodLevelResources and
    InPlacePodVerticalScaling switches (fit.go nodeResourceStrategyTypeMap, in every release
    from v1.34 to v1.37; BalancedAllocation's has them). It differs from ``nonzero_pair`` for
    a pod with pod-level requests."""
    total = _aggregate(spec, _NONZERO_DEFAULTS, _spec_requests)
    _add(total, _resource_list(spec.get("overhead")))
    return _pair(total)


def _largest_totals(
    spec: Mapping[str, Any],
    defaults: Mapping[str, int],
    status: Mapping[str, Any],
    resize: ResizeAccounting,
) -> dict[str, int]:
    """From v1.37 (AggregateContainerRequests): the largest of the spec's, the actuated and
    the allocated totals, each summed as the spec's is (the spec's left out when the resize
    is infeasible). A container counts its status's allocated resources, else its spec;
    actuated, its status's resources, else its allocated ones, else its spec (nothing, when
    the resize is infeasible). With InPlacePodLevelResourcesVerticalScaling the pod's own
    status.allocatedResources and status.resources.requests are those two totals, when it
    reports both."""
    statuses, infeasible = _container_statuses(status), _infeasible(status)

    def allocated_of(container: Mapping[str, Any], _init: bool) -> Mapping[str, int] | None:
        found = statuses.get(str(container.get("name", "")))
        if found is not None and found.get("allocatedResources") is not None:
            return _resource_list(found["allocatedResources"])
        return None if infeasible else _spec_requests(container)

    def actuated_of(container: Mapping[str, Any], init: bool) -> Mapping[str, int] | None:
        found = statuses.get(str(container.get("name", "")))
        reported = None if found is None else (found.get("resources") or {}).get("requests")
        if reported is not None:
            return _resource_list(reported)
        return allocated_of(container, init)

    totals = _aggregate(spec, defaults, _spec_requests)
    pod_status = status.get("resources") or {}
    if (
        resize.pod_level_status
        and status.get("allocatedResources") is not None
        and pod_status.get("requests") is not None
    ):
        allocated = _resource_list(status["allocatedResources"])
        actuated = _resource_list(pod_status["requests"])
    else:
        allocated = _aggregate(spec, defaults, allocated_of)
        actuated = _aggregate(spec, defaults, actuated_of)
    return _largest(None if infeasible else totals, actuated, allocated)


def _pod_level_effective(
    spec: Mapping[str, Any],
    pod_level: Mapping[str, int],
    status: Mapping[str, Any] | None,
    resize: ResizeAccounting,
) -> dict[str, int]:
    """The pod-level requests that replace the containers' total: the spec's, or with
    InPlacePodLevelResourcesVerticalScaling and a status reporting the pod's resources the
    largest of the spec's (left out when the resize is infeasible), status.resources.requests
    and status.allocatedResources: for the resources the spec names (up to v1.36: 0 for one
    neither status list names when the spec is left out) or, from v1.37, every pod-level
    resource they name."""
    reported = None if status is None else status.get("resources")
    if status is None or reported is None or not resize.pod_level_status:
        return dict(pod_level)
    infeasible = _infeasible(status)
    raw = _resource_list((spec.get("resources") or {}).get("requests"))
    effective = _largest(
        None if infeasible else raw,
        _resource_list(reported.get("requests")),
        _resource_list(status.get("allocatedResources")),
    )
    if resize.pod_totals:
        return {name: value for name, value in effective.items() if pod_level_resource(name)}
    return {name: effective.get(name, 0) for name in pod_level}


def rfc3339(text: str) -> str:
    """A timestamp as the API server writes it (``2026-11-30T09:00:00Z``, UTC), whichever way
    of RFC 3339 it came in (the Python client writes ``+00:00``); the text as it is when it is
    not one. The queue orders pods by it, and replay compares pods by it."""
    if not text or (text.endswith("Z") and "." not in text and len(text) == 20):
        return text  # the API server's own form: the hot path, untouched
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return text
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    moment = moment.astimezone(datetime.UTC)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_pod(
    body: Mapping[str, Any],
    known: PodInfo | None = None,
    resize: ResizeAccounting = NEWEST_RESIZE,
) -> PodInfo:
    """A PodInfo from a pod body; an unusable spec is recorded in ``problem``, never raised.

    ``known``: the same pod as last parsed. When its generation and labels are this body's,
    the spec has not changed since (a binding, a status or an annotation change: most of a
    pod's events), and what is read from the spec is taken from it rather than parsed again.
    ``resize``: how the status counts in the requests (the release plumb decides as).
    """
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    if known is not None and known.generation:
        generation = metadata.get("generation")
        if (
            generation == known.generation
            and metadata.get("uid") == known.uid
            and _labels(metadata) == known.labels
        ):
            return _respecified(known, metadata, spec, status, resize)
    problems = []
    try:
        resources = _Resources.of(spec, status, resize)
    except quantities.QuantityError as error:
        resources = _Resources(_EMPTY, (DEFAULT_MILLI_CPU, DEFAULT_MEMORY), None, False)
        problems.append(f"invalid resource request: {error}")
    requests, nonzero, incoming = resources.requests, resources.nonzero, resources.incoming
    namespace = str(metadata.get("namespace", ""))
    try:
        scheduling = specs.parse_scheduling(spec, namespace)
    except (specs.SpecError, ValueError, TypeError, KeyError) as error:
        scheduling = specs.NO_CONSTRAINTS
        problems.append(f"unusable scheduling constraints: {error}")
    return PodInfo(
        uid=str(metadata.get("uid", "")),
        namespace=namespace,
        name=str(metadata.get("name", "")),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=str(spec.get("nodeName") or ""),
        priority=int(spec.get("priority") or 0),
        creation_timestamp=rfc3339(str(metadata.get("creationTimestamp") or "")),
        resource_version=str(metadata.get("resourceVersion") or ""),
        requests=requests,
        nonzero=nonzero,
        nonzero_incoming=incoming,
        terminal=status.get("phase") in TERMINAL_PHASES,
        deleting=metadata.get("deletionTimestamp") is not None,
        gated=bool(spec.get("schedulingGates")),
        labels=_labels(metadata),
        scheduling=scheduling,
        owner=_owner(metadata),
        images=_images(spec),
        image_volumes=_image_volumes(spec),
        needed_features=needed_features(spec),
        problem="; ".join(problems) or None,
        scheduled_condition=_pod_scheduled(status),
        preemption_policy=str(spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY),
        qos=_qos(spec, status),
        nominated_node=str(status.get("nominatedNodeName") or ""),
        start_time=str(status.get("startTime") or ""),
        preempted=_preempted(status),
        claims=_claims(spec, str(metadata.get("name", ""))),
        resource_claims=draobjects.pod_resource_claims(spec),
        claim_statuses=_claim_statuses(status),
        generation=_generation(metadata),
        status_resources=resources.from_status,
        device_requests=_device_requests(spec),
        pod_group=str((spec.get("schedulingGroup") or {}).get("podGroupName") or ""),
    )


def _device_requests(spec: Mapping[str, Any]) -> tuple[ContainerDeviceRequests, ...]:
    """Each container's requests a DeviceClass may back (createResourceRequestAndMappings
    reads them: a count that is not a whole number is left out)."""
    found = []
    inits = spec.get("initContainers") or ()
    for index, container in enumerate([*inits, *(spec.get("containers") or ())]):
        raw = (container.get("resources") or {}).get("requests") or {}
        names = sorted(str(name) for name in raw)
        requests = []
        for place, name in enumerate(names):
            if not draobjects.device_backed_name(name):
                continue
            try:
                count = quantities.parse(raw[name])
            except quantities.QuantityError:
                continue
            if count.denominator == 1 and count:
                requests.append((name, place, int(count)))
        if requests:
            found.append(
                ContainerDeviceRequests(
                    index=index,
                    name=str(container.get("name", "")),
                    init=index < len(inits) and not _restartable(container),
                    requests=tuple(requests),
                )
            )
    return tuple(found)


@dataclasses.dataclass(frozen=True, slots=True)
class _Resources:
    """What a pod counts on its node: its requests, its non-zero pair, the pair scored for
    it as the incoming pod where that differs (None: the same), and whether the status took
    part."""

    requests: Mapping[str, int]
    nonzero: tuple[int, int]
    incoming: tuple[int, int] | None
    from_status: bool

    @classmethod
    def of(
        cls, spec: Mapping[str, Any], status: Mapping[str, Any], resize: ResizeAccounting
    ) -> _Resources:
        """Raises QuantityError for a quantity that cannot be read."""
        read = status if reads_status(status) else None
        requests = MappingProxyType(pod_requests(spec, read, resize))
        scored = scoring_pair(spec)
        # Without pod-level requests or a status that counts the two pairs are the same sum
        # (their docs): one walk of the containers fewer per pod event.
        same = read is None and not _pod_level_requests(spec)
        nonzero = scored if same else nonzero_pair(spec, read, resize)
        return cls(requests, nonzero, scored if scored != nonzero else None, read is not None)


def same_but_node(left: PodInfo, right: PodInfo) -> bool:
    """Whether the two are equal (as PodInfo compares) but for ``node_name``."""
    return all(getattr(left, name) == getattr(right, name) for name in _COMPARED_BUT_NODE)


def _respecified(
    known: PodInfo,
    metadata: Mapping[str, Any],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    resize: ResizeAccounting,
) -> PodInfo:
    """``known`` with what a body may change without changing its generation read again:
    the node a binding sets, the metadata and the status (and the requests, when the status
    takes part in them: a resize the kubelet reports)."""
    respecified = dataclasses.replace(
        known,
        node_name=str(spec.get("nodeName") or ""),
        resource_version=str(metadata.get("resourceVersion") or ""),
        terminal=status.get("phase") in TERMINAL_PHASES,
        deleting=metadata.get("deletionTimestamp") is not None,
        owner=_owner(metadata),
        scheduled_condition=_pod_scheduled(status),
        qos=_qos(spec, status),
        nominated_node=str(status.get("nominatedNodeName") or ""),
        start_time=str(status.get("startTime") or ""),
        preempted=_preempted(status),
        claim_statuses=_claim_statuses(status),
    )
    if not known.status_resources and not reads_status(status):
        return respecified
    try:
        resources = _Resources.of(spec, status, resize)
    except quantities.QuantityError:
        return respecified  # the spec's problem is known's already
    return dataclasses.replace(
        respecified,
        requests=resources.requests,
        nonzero=resources.nonzero,
        nonzero_incoming=resources.incoming,
        status_resources=resources.from_status,
    )


def _claim_statuses(status: Mapping[str, Any]) -> Mapping[str, str]:
    if not status.get("resourceClaimStatuses"):
        return _EMPTY_NAMES  # most pods: one shared empty mapping
    return draobjects.pod_claim_statuses(status)


def _generation(metadata: Mapping[str, Any]) -> int:
    generation = metadata.get("generation")
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def _owner(metadata: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the controller owning the object (the last one, as before)."""
    owner = None
    for reference in metadata.get("ownerReferences") or ():
        if reference.get("controller"):
            owner = (str(reference.get("kind", "")), str(reference.get("name", "")))
    return owner


def _claims(spec: Mapping[str, Any], pod_name: str) -> tuple[PodClaim, ...]:
    """The pod's PersistentVolumeClaims: named ones, and ``<pod>-<volume>`` per ephemeral volume."""
    claims = []
    for volume in spec.get("volumes") or ():
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            claims.append(PodClaim(str(claim.get("claimName") or "")))
        elif volume.get("ephemeral") is not None:
            claims.append(PodClaim(f"{pod_name}-{volume.get('name', '')}", ephemeral=True))
    return tuple(claims)


def _qos(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """The pod's QoS class: status.qosClass (set by the API server), else as the API server
    computes it from the containers' cpu and memory requests and limits (GetPodQOS)."""
    listed = status.get("qosClass")
    if listed in QOS_CLASSES:
        return str(listed)
    try:
        return qos_class(spec)
    except quantities.QuantityError:
        return BURSTABLE


def qos_class(spec: Mapping[str, Any]) -> str:
    """The QoS class as the API server computes it (qos.ComputePodQOS) from cpu and memory
    requests and limits above zero: from ``spec.resources`` alone when the pod has it
    (PodLevelResources), else from every app and init container, a container's unset request
    taking its limit as the API server's defaulting does. BestEffort when nothing is set;
    Guaranteed when limits name both cpu and memory (every container's, at container level)
    and the summed requests equal the summed limits; Burstable otherwise."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    if spec.get("resources") is not None:
        resources = spec["resources"]
        _add(requests, _qos_list(resources.get("requests")))
        if resources.get("limits"):
            pod_limits = _qos_list(resources.get("limits"))
            _add(limits, pod_limits)
            guaranteed = set(pod_limits) >= set(_QOS_RESOURCES)
    else:
        for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
            resources = container.get("resources") or {}
            raw_limits = resources.get("limits") or {}
            limited = _qos_list(raw_limits)
            _add(requests, _qos_list({**raw_limits, **(resources.get("requests") or {})}))
            _add(limits, limited)
            if not set(limited) >= set(_QOS_RESOURCES):
                guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    equal = all(limits.get(name) == value for name, value in requests.items())
    return GUARANTEED if guaranteed and equal and len(requests) == len(limits) else BURSTABLE


def _qos_list(raw: Mapping[str, Any] | None) -> dict[str, int]:
    """The cpu and memory of a resource list that count for QoS: those above zero."""
    listed = _resource_list({k: v for k, v in (raw or {}).items() if k in _QOS_RESOURCES})
    return {name: value for name, value in listed.items() if value > 0}


def _preempted(status: Mapping[str, Any]) -> bool:
    return any(
        condition.get("type") == DISRUPTION_TARGET
        and condition.get("status") == "True"
        and condition.get("reason") == PREEMPTION_BY_SCHEDULER
        for condition in status.get("conditions") or ()
    )


def _labels(metadata: Mapping[str, Any]) -> Mapping[str, str]:
    labels = metadata.get("labels")
    if not labels:
        return _EMPTY_LABELS
    return MappingProxyType({str(k): str(v) for k, v in labels.items()})


def _pod_scheduled(status: Mapping[str, Any]) -> tuple[str, str, str] | None:
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return (
                str(condition.get("status", "")),
                str(condition.get("reason", "")),
                str(condition.get("message", "")),
            )
    return None


def normalized_image(name: str) -> str:
    """An image name as kube-scheduler's ImageLocality looks it up in a node's images:
    ":latest" added when the name has no tag (no ":" after its last "/")."""
    if name.rfind(":") <= name.rfind("/"):
        name += ":latest"
    return sys.intern(name)


def _images(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The normalised image of every init container, then every app container."""
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    return tuple(normalized_image(str(c.get("image") or "")) for c in containers)


def _image_volumes(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The normalised image of every image volume, in spec order."""
    return tuple(
        normalized_image(str(volume["image"].get("reference") or ""))
        for volume in spec.get("volumes") or ()
        if isinstance(volume.get("image"), Mapping)
    )


# The node features a pod's spec may need, named as nodes declare them; each release's
# NodeDeclaredFeatures knows some of them (framework/plugins/nodedeclaredfeatures.py). The
# others of component-helpers' registry concern pod updates only (InferForScheduling false).
RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"
NEEDED_FEATURES = (RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK, VOLUME_BIND_MOUNT_OPTIONS)
_NO_FEATURES: frozenset[str] = frozenset()


def needed_features(spec: Mapping[str, Any]) -> frozenset[str]:
    """The features of NEEDED_FEATURES the spec needs, as each one's InferForScheduling in
    component-helpers nodedeclaredfeatures/features/ says:

    - RestartAllContainersOnContainerExits: an app or init container with a restart rule whose
      action is RestartAllContainers (restartallcontainers/restart_all_containers.go);
    - UserNamespacesHostNetworkSupport: hostNetwork with hostUsers false
      (usernamespaceshostnetwork/user_namespaces_host_network.go);
    - VolumeBindMountOptions: a volume mount of any container, ephemeral ones too, with
      bindMountOptions (volumebindmountoptions/feature.go).
    """
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    needed = set()
    if any(
        rule.get("action") == "RestartAllContainers"
        for container in containers
        for rule in container.get("restartPolicyRules") or ()
    ):
        needed.add(RESTART_ALL_CONTAINERS)
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        needed.add(USER_NAMESPACES_HOST_NETWORK)
    if any(
        mount.get("bindMountOptions")
        for container in [*containers, *(spec.get("ephemeralContainers") or ())]
        for mount in container.get("volumeMounts") or ()
    ):
        needed.add(VOLUME_BIND_MOUNT_OPTIONS)
    return frozenset(needed) if needed else _NO_FEATURES


def _node_images(status: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """(name, size) for every name of every image in status.images, names interned."""
    images: list[tuple[str, int]] = []
    for image in status.get("images") or ():
        try:
            size = int(image.get("sizeBytes") or 0)
        except (TypeError, ValueError):
            size = 0
        for name in image.get("names") or ():
            images.append((sys.intern(str(name)), size))
    return tuple(images)


def parse_node(body: Mapping[str, Any]) -> NodeInfo:
    """A NodeInfo from a node body; allocatable falls back to capacity, as the kubelet reports."""
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity") or {}
    problem = None
    try:
        allocatable: Mapping[str, int] = MappingProxyType(_resource_list(raw))
    except quantities.QuantityError as error:
        allocatable, problem = _EMPTY, f"invalid allocatable: {error}"
    spec = body.get("spec") or {}
    return NodeInfo(
        name=str(metadata.get("name", "")),
        allocatable=allocatable,
        labels=_labels(metadata),
        taints=specs.parse_taints(spec.get("taints") or ()),
        unschedulable=bool(spec.get("unschedulable")),
        problem=problem,
        images=_node_images(status),
        declared_features=tuple(
            sys.intern(str(name)) for name in status.get("declaredFeatures") or ()
        ),
        annotations=_annotations(metadata),
    )


def _annotations(metadata: Mapping[str, Any]) -> Mapping[str, str]:
    raw = metadata.get("annotations")
    if not raw:
        return _EMPTY_LABELS
    return MappingProxyType({str(key): str(value) for key, value in raw.items()})


_COMPARED_BUT_NODE = tuple(
    field.name
    for field in dataclasses.fields(PodInfo)
    if field.compare and field.name != "node_name"
)
