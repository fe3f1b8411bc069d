"""Pod and Node bodies from the API turned into the compact records the cache and queue keep."""

from __future__ import annotations

import dataclasses
import datetime
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from plumb.backend.records import specs
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
_EMPTY_LABELS: Mapping[str, str] = MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True)
class PodClaim:
    """A PersistentVolumeClaim a pod's volume names: ``spec.volumes[].persistentVolumeClaim``,
    or a generic ephemeral volume, whose claim is ``<pod>-<volume>`` and must be the pod's own."""

    name: str
    ephemeral: bool = False


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
    # that differs from ``nonzero`` (a corner of pod-level requests, see scoring_pair); None:
    # the same. Read it through ``scored_nonzero``.
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
    # metadata.generation: the API server counts each change of the spec in it, but not a
    # binding (nor a label or status change); 0 where it is not set. Not compared: equal
    # generations mean the spec-derived fields above are equal.
    generation: int = dataclasses.field(default=0, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

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


def _requests(spec: Mapping[str, Any], defaults: Mapping[str, int]) -> dict[str, int]:
    """component-helpers' PodRequests, keeping every resource named (even at zero: whether a
    request is set at all decides the non-zero defaults).

    max(sum of containers + restartable init containers, each init container run on top of the
    restartable init containers started before it); then each pod-level request replaces that
    total for its resource; then the overhead is added. ``defaults`` fill in the resources a
    container does not name (NonMissingContainerRequests), before the pod-level override.
    """

    def requests_of(container: Mapping[str, Any]) -> dict[str, int]:
        listed = _resource_list((container.get("resources") or {}).get("requests"))
        for name, default in defaults.items():
            listed.setdefault(name, default)
        return listed

    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add(total, requests_of(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        requests = requests_of(container)
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            _maximise(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
            _maximise(init_peak, running)
    _maximise(total, init_peak)
    total.update(_pod_level_requests(spec))
    _add(total, _resource_list(spec.get("overhead")))
    return total


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective request, as kube-scheduler v1.34 computes it (PodLevelResources on,
    its default): the containers' requests, replaced per resource by ``spec.resources.requests``
    where the pod sets them, plus the overhead; zeros dropped."""
    total = _requests(spec, _EMPTY)
    total.pop(PODS, None)
    # Each quantity fits int64 but a sum may not; the cache keeps int64s.
    return {name: quantities.clamp_int64(value) for name, value in total.items() if value}


def _pair(counted: Mapping[str, int]) -> tuple[int, int]:
    return (
        quantities.clamp_int64(counted.get(CPU, 0)),
        quantities.clamp_int64(counted.get(MEMORY, 0)),
    )


def nonzero_pair(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(cpu millicores, memory bytes) the pod adds to its node's non-zero requests, which
    NodeResourcesFit's scorers read (framework.PodInfo.CalculateResource).

    A container that names no cpu (memory) request counts 100m (200Mi). With pod-level
    requests set, only a resource that neither a container, the pod level nor the overhead
    names gets the default (getNonMissingContainerRequests): a pod-level memory request and
    one container asking 500m cpu beside one asking none count 500m, not 600m.
    """
    requests = _requests(spec, _EMPTY)
    defaults: Mapping[str, int] = _NONZERO_DEFAULTS
    if _pod_level_requests(spec):
        defaults = {name: value for name, value in defaults.items() if name not in requests}
    return _pair(_requests(spec, defaults) if defaults else requests)


def scoring_pair(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(cpu millicores, memory bytes) NodeResourcesFit's scorers count for the pod being
    scheduled (resourceAllocationScorer.calculatePodResourceRequest): every container that names
    no cpu (memory) request counts 100m (200Mi), pod-level requests or not, and a pod-level
    request then replaces the total. It differs from ``nonzero_pair`` only for a pod with
    pod-level requests whose containers name cpu or memory in some containers and not others,
    or only in the overhead."""
    return _pair(_requests(spec, _NONZERO_DEFAULTS))


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


def parse_pod(body: Mapping[str, Any], known: PodInfo | None = None) -> PodInfo:
    """A PodInfo from a pod body; an unusable spec is recorded in ``problem``, never raised.

    ``known``: the same pod as last parsed. When its generation and labels are this body's,
    the spec has not changed since (a binding, a status or an annotation change: most of a
    pod's events), and what is read from the spec is taken from it rather than parsed again.
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
            return _respecified(known, metadata, spec, status)
    problems = []
    nonzero, incoming = (DEFAULT_MILLI_CPU, DEFAULT_MEMORY), None
    try:
        requests: Mapping[str, int] = MappingProxyType(pod_requests(spec))
        scored = scoring_pair(spec)
        # Without pod-level requests the two pairs are the same sum (their docs): one walk of
        # the containers fewer per pod event.
        nonzero = nonzero_pair(spec) if _pod_level_requests(spec) else scored
        if scored != nonzero:
            incoming = scored
    except quantities.QuantityError as error:
        requests = _EMPTY
        problems.append(f"invalid resource request: {error}")
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
        generation=_generation(metadata),
    )


def same_but_node(left: PodInfo, right: PodInfo) -> bool:
    """Whether the two are equal (as PodInfo compares) but for ``node_name``."""
    return all(getattr(left, name) == getattr(right, name) for name in _COMPARED_BUT_NODE)


def _respecified(
    known: PodInfo, metadata: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any]
) -> PodInfo:
    """``known`` with what a body may change without changing its generation read again:
    the node a binding sets, the metadata and the status."""
    return dataclasses.replace(
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
    )


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
    )


_COMPARED_BUT_NODE = tuple(
    field.name
    for field in dataclasses.fields(PodInfo)
    if field.compare and field.name != "node_name"
)
