"""Plugin arguments (pluginConfig[].args) as kube-scheduler reads them: decoded strictly
against their kind, defaulted (v1/defaults.go) and validated
(validation/validation_pluginargs.go). ``SCHEMAS`` are v1.34.4's; the fields a later release
added (revisions.py's ARGS_FIELD rows), their defaults and their checks follow the release
and the gates plumb decides with (DRASchedulerFilterTimeout is on in every release);
VolumeBindingArgs.shape follows the release's StorageCapacityScoring gate (on by default in
v1.37): ``volume_binding_shape``.

Arguments stay plain dicts after defaulting; every path named is the full one from the
file's root (``profiles[0].pluginConfig[1].args.scoringStrategy.type``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from plumb.framework import emulation
from plumb.framework.schedconfig import decoding, errors, names, revisions
from plumb.framework.schedconfig.decoding import (
    BOOL,
    DURATION,
    INT32,
    INT64,
    STRING,
    ListOf,
    MapOf,
    Schema,
)
from plumb.framework.schedconfig.errors import ConfigError

Args = dict[str, Any]

_RESOURCE: dict[str, Schema] = {"name": STRING, "weight": INT64}
_SHAPE_POINT: dict[str, Schema] = {"utilization": INT32, "score": INT32}
_REQUIREMENT: dict[str, Schema] = {"key": STRING, "operator": STRING, "values": ListOf(STRING)}
_LABEL_SELECTOR: dict[str, Schema] = {
    "matchLabels": MapOf(STRING),
    "matchExpressions": ListOf(_REQUIREMENT),
}
_SPREAD: dict[str, Schema] = {
    "maxSkew": INT32,
    "topologyKey": STRING,
    "whenUnsatisfiable": STRING,
    "labelSelector": _LABEL_SELECTOR,
    "minDomains": INT32,
    "nodeAffinityPolicy": STRING,
    "nodeTaintsPolicy": STRING,
    "matchLabelKeys": ListOf(STRING),
}
_NODE_TERM: dict[str, Schema] = {
    "matchExpressions": ListOf(_REQUIREMENT),
    "matchFields": ListOf(_REQUIREMENT),
}
SCHEMAS: Mapping[str, dict[str, Schema]] = {
    "DefaultPreemption": {
        **decoding.TYPE_META,
        "minCandidateNodesPercentage": INT32,
        "minCandidateNodesAbsolute": INT32,
    },
    "InterPodAffinity": {
        **decoding.TYPE_META,
        "hardPodAffinityWeight": INT32,
        "ignorePreferredTermsOfExistingPods": BOOL,
    },
    "NodeResourcesFit": {
        **decoding.TYPE_META,
        "ignoredResources": ListOf(STRING),
        "ignoredResourceGroups": ListOf(STRING),
        "scoringStrategy": {
            "type": STRING,
            "resources": ListOf(_RESOURCE),
            "requestedToCapacityRatio": {"shape": ListOf(_SHAPE_POINT)},
        },
    },
    "PodTopologySpread": {
        **decoding.TYPE_META,
        "defaultConstraints": ListOf(_SPREAD),
        "defaultingType": STRING,
    },
    "NodeResourcesBalancedAllocation": {**decoding.TYPE_META, "resources": ListOf(_RESOURCE)},
    "VolumeBinding": {
        **decoding.TYPE_META,
        "bindTimeoutSeconds": INT64,
        "shape": ListOf(_SHAPE_POINT),
    },
    "NodeAffinity": {
        **decoding.TYPE_META,
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": ListOf(_NODE_TERM)
            },
            "preferredDuringSchedulingIgnoredDuringExecution": ListOf(
                {"weight": INT32, "preference": _NODE_TERM}
            ),
        },
    },
    "DynamicResources": {**decoding.TYPE_META, "filterTimeout": DURATION},
}
"""Every plugin with an args kind (``<plugin>Args``) in kubescheduler.config.k8s.io/v1."""

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
MAX_CUSTOM_PRIORITY_SCORE = 10
_DEFAULT_RESOURCES = ({"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1})
_NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPERATORS = ("In", "NotIn")
_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")


def schema(name: str, minor: int = emulation.NEWEST) -> dict[str, Schema] | None:
    """The args kind of plugin ``name`` in v1.``minor`` (None: the plugin has none)."""
    fields = SCHEMAS.get(name)
    if fields is None:
        return None
    added = {
        row.field: row.schema
        for row in revisions.rows(revisions.ARGS_FIELD, minor)
        if row.plugin == name
    }
    return {**fields, **added}


def decode(
    name: str, raw: Any, path: str, kube: emulation.Emulation = emulation.NEWEST_EMULATION
) -> Args | None:
    """The args of pluginConfig entry ``path`` for plugin ``name``, decoded and defaulted as
    the release ``kube`` does; None for a plugin without an args kind (kube-scheduler keeps
    those raw and unread). A field of a later release is refused saying so."""
    fields = schema(name, kube.minor)
    if fields is None:
        return None
    kind = f"{name}Args"
    prefix = f"decoding .{path}: decoding args for plugin {name}"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{path}.args",
            f"{prefix}: couldn't get version/kind; json parse error: json: cannot unmarshal "
            "non-object args",
        )
    version = raw.get("apiVersion") or decoding.API_VERSION
    given = raw.get("kind") or kind
    if version != decoding.API_VERSION or given not in {f"{n}Args" for n in SCHEMAS}:
        raise ConfigError(
            f"{path}.args",
            f'{prefix}: no kind "{given}" is registered for version "{version}" in scheme '
            '"pkg/runtime/scheme.go:110"',
        )
    if given != kind:
        group = "kubescheduler.config.k8s.io"
        raise ConfigError(
            f"{path}.args.kind",
            f"decoding .{path}: args for plugin {name} were not of type {kind}.{group}, "
            f"got {given}.{group}",
        )
    try:
        unknown = decoding.check(raw, fields, f"{path}.args")
    except ConfigError as error:
        raise ConfigError(error.field, f"{prefix}: {error.message}") from None
    for where in unknown:
        field = where.removeprefix(f"{path}.args.")
        row = revisions.later(revisions.ARGS_FIELD, f"{name}.{field}", kube.minor)
        if row is not None:
            raise errors.later(where, f"{kind}.{field}", row.minor, kube.minor)
    if unknown:
        named = ", ".join(f'unknown field "{u.removeprefix(path + ".args.")}"' for u in unknown)
        raise ConfigError(
            unknown[0],
            named,
            f"strict decoding error: decoding .{path}: strict decoding error: decoding args for "
            f"plugin {name}: strict decoding error: {named} (at {unknown[0]})",
        )
    return _defaulted(name, raw, kube)


def default(name: str, kube: emulation.Emulation = emulation.NEWEST_EMULATION) -> Args | None:
    """The args kube-scheduler of the release ``kube`` gives an enabled plugin the file
    configures none for."""
    return _defaulted(name, {}, kube) if name in SCHEMAS else None


def completed(name: str, args: Args, kube: emulation.Emulation) -> Args:
    """Defaulted args as kube-scheduler writes them back: its durations in Go's form
    ("5m" is "5m0s")."""
    fields = schema(name, kube.minor) or {}
    out = copy.deepcopy(args)
    for field, kind in fields.items():
        nanoseconds = names.parse_nanoseconds(str(out[field])) if field in out else None
        if kind == DURATION and nanoseconds is not None:
            out[field] = names.go_duration(nanoseconds)
    return out


def _defaulted(name: str, raw: Args, kube: emulation.Emulation) -> Args:
    args: Args = {k: copy.deepcopy(v) for k, v in raw.items() if v is not None}
    for row in revisions.rows(revisions.ARGS_FIELD, kube.minor):
        if row.plugin == name and row.default_ns is not None and revisions.gates_on(row, kube):
            args.setdefault(row.field, names.go_duration(row.default_ns))
    if name == "DefaultPreemption":
        args.setdefault("minCandidateNodesPercentage", 10)
        args.setdefault("minCandidateNodesAbsolute", 100)
    elif name == "InterPodAffinity":
        args.setdefault("hardPodAffinityWeight", 1)
        args.setdefault("ignorePreferredTermsOfExistingPods", False)
    elif name == "NodeResourcesFit":
        strategy = args.get("scoringStrategy")
        if strategy is None:
            strategy = {"type": LEAST_ALLOCATED, "resources": copy.deepcopy(_DEFAULT_RESOURCES)}
        strategy = {k: v for k, v in strategy.items() if v is not None}
        strategy.setdefault("type", "")
        if not strategy.get("resources"):
            strategy["resources"] = copy.deepcopy(_DEFAULT_RESOURCES)
        strategy["resources"] = [_weighted(r) for r in strategy["resources"]]
        args["scoringStrategy"] = strategy
    elif name == "NodeResourcesBalancedAllocation":
        resources = args.get("resources") or copy.deepcopy(_DEFAULT_RESOURCES)
        args["resources"] = [_weighted(r) for r in resources]
    elif name == "PodTopologySpread":
        if not args.get("defaultingType"):
            args["defaultingType"] = SYSTEM_DEFAULTING
    elif name == "VolumeBinding":
        args.setdefault("bindTimeoutSeconds", 600)
    elif name == "DynamicResources":
        args.setdefault("filterTimeout", "10s")
    return args


def _weighted(resource: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict(resource or {})
    out["name"] = str(out.get("name") or "")
    out["weight"] = int(out.get("weight") or 0) or 1
    return out


# Validation from the configuration (validatePluginConfig) ------------------------------------


def validate(
    name: str, args: Args, path: str, kube: emulation.Emulation = emulation.NEWEST_EMULATION
) -> ConfigError | None:
    """The first error kube-scheduler's configuration validation finds in these args (path:
    the pluginConfig entry) in the release ``kube``. NodeResourcesFit is not among them:
    kube-scheduler (v1.34.4 to v1.37.2) looks its validator up under "NodeResourcesFitArgs",
    so its args are validated only when the plugin is built (``validate_fit``)."""
    by_release = _RELEASE_VALIDATORS.get(name)
    if by_release is not None:
        return by_release(args, f"{path}.args", kube)
    check = _VALIDATORS.get(name)
    return check(args, f"{path}.args") if check is not None else None


def _default_preemption(args: Args, path: str) -> ConfigError | None:
    percentage = int(args["minCandidateNodesPercentage"])
    absolute = int(args["minCandidateNodesAbsolute"])
    if not 0 <= percentage <= 100:
        return errors.invalid(
            f"{path}.minCandidateNodesPercentage", percentage, "not in valid range [0, 100]"
        )
    if absolute < 0:
        return errors.invalid(
            f"{path}.minCandidateNodesAbsolute", absolute, "not in valid range [0, inf)"
        )
    if percentage == 0 and absolute == 0:
        return errors.invalid(
            f"{path}.minCandidateNodesPercentage",
            percentage,
            "cannot be zero at the same time as minCandidateNodesAbsolute",
        )
    return None


def _inter_pod_affinity(args: Args, path: str) -> ConfigError | None:
    weight = int(args["hardPodAffinityWeight"])
    if not 0 <= weight <= 100:
        return errors.invalid(
            f"{path}.hardPodAffinityWeight", weight, "not in valid range [0, 100]"
        )
    return None


def _balanced(args: Args, path: str) -> ConfigError | None:
    seen: set[str] = set()
    for i, resource in enumerate(args["resources"]):
        where = f"{path}.resources[{i}]"
        if resource["name"] in seen:
            return errors.duplicate(f"{where}.name", resource["name"])
        seen.add(resource["name"])
        if resource["weight"] != 1:
            return errors.invalid(f"{where}.weight", resource["weight"], "must be 1")
    return None


def _spread(args: Args, path: str) -> ConfigError | None:
    defaulting = args["defaultingType"]
    constraints = args.get("defaultConstraints") or []
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        return errors.not_supported(
            f"{path}.defaultingType", defaulting, (SYSTEM_DEFAULTING, LIST_DEFAULTING)
        )
    if defaulting == SYSTEM_DEFAULTING and constraints:
        return errors.invalid(
            f"{path}.defaultingType", defaulting, "when .defaultConstraints are not empty"
        )
    seen: list[tuple[str, str]] = []
    for i, item in enumerate(constraints):
        where = f"{path}.defaultConstraints[{i}]"
        constraint = item or {}  # null: Go's zero value, refused below for its maxSkew
        skew = int(constraint.get("maxSkew") or 0)
        if skew <= 0:
            return errors.invalid(f"{where}.maxSkew", skew, "not in valid range (0, inf)")
        key = str(constraint.get("topologyKey") or "")
        if not key:
            return errors.required(f"{where}.topologyKey", "can not be empty")
        problem = _label_name(f"{where}.topologyKey", key)
        if problem is not None:
            return problem
        when = str(constraint.get("whenUnsatisfiable") or "")
        if not when:
            return errors.required(f"{where}.whenUnsatisfiable", "can not be empty")
        if when not in _ACTIONS:
            return errors.not_supported(f"{where}.whenUnsatisfiable", when, _ACTIONS)
        if constraint.get("labelSelector") is not None:
            return errors.forbidden(
                f"{where}.labelSelector",
                "constraint must not define a selector, as they deduced for each pod",
            )
        if (key, when) in seen:
            return errors.duplicate(where, f"{{{key}, {when}}}")
        seen.append((key, when))
    return None


def _node_affinity(args: Args, path: str) -> ConfigError | None:
    affinity = args.get("addedAffinity")
    if affinity is None:
        return None
    base = f"{path}.addedAffinity"
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        where = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        for i, term in enumerate(required.get("nodeSelectorTerms") or ()):
            problem = _node_term(term or {}, f"{where}[{i}]")
            if problem is not None:
                return problem
    where = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, preferred in enumerate(
        affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    ):
        preferred = preferred or {}
        if not preferred.get("weight"):
            continue
        problem = _node_term(preferred.get("preference") or {}, f"{where}[{i}]")
        if problem is not None:
            return problem
    return None


def is_empty_term(term: Mapping[str, Any]) -> bool:
    return not term.get("matchExpressions") and not term.get("matchFields")


def _node_term(term: Mapping[str, Any], path: str) -> ConfigError | None:
    if is_empty_term(term):
        return None
    for i, expression in enumerate(term.get("matchExpressions") or ()):
        problem = _label_requirement(expression or {}, f"{path}.matchExpressions[{i}]")
        if problem is not None:
            return problem
    for i, expression in enumerate(term.get("matchFields") or ()):
        expression = expression or {}
        where = f"{path}.matchFields[{i}]"
        operator = str(expression.get("operator") or "")
        values = list(expression.get("values") or ())
        if operator not in _FIELD_OPERATORS:
            return errors.not_supported(f"{where}.operator", operator, _FIELD_OPERATORS)
        if len(values) != 1:
            return errors.invalid(f"{where}.values", values, "must have one element")
    return None


def _label_requirement(expression: Mapping[str, Any], path: str) -> ConfigError | None:
    key = str(expression.get("key") or "")
    operator = str(expression.get("operator") or "")
    values = [str(v) for v in expression.get("values") or ()]
    if operator not in _NODE_OPERATORS:
        return errors.not_supported(f"{path}.operator", operator, _NODE_OPERATORS)
    key_errors = names.qualified_name_errors(key)
    if key_errors:
        return errors.invalid(f"{path}.key", key, "; ".join(key_errors))
    if operator in ("In", "NotIn") and not values:
        return errors.invalid(
            f"{path}.values", values, "for 'in', 'notin' operators, values set can't be empty"
        )
    if operator in ("Exists", "DoesNotExist") and values:
        return errors.invalid(
            f"{path}.values", values, "values set must be empty for exists and does not exist"
        )
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            return errors.invalid(
                f"{path}.values", values, "for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, value in enumerate(values):
            if _go_int64(value) is None:
                return errors.invalid(
                    f"{path}.values[{i}]",
                    value,
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                )
    for i, value in enumerate(values):
        value_errors = names.label_value_errors(value)
        if value_errors:
            return errors.invalid(f"{path}.values[{i}][{key}]", value, "; ".join(value_errors))
    return None


def _go_int64(text: str) -> int | None:
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii():
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _volume_binding(args: Args, path: str) -> ConfigError | None:
    """ValidateVolumeBindingArgs but its shape, which depends on a gate: see
    ``volume_binding_shape``."""
    timeout = int(args["bindTimeoutSeconds"])
    if timeout < 0:
        return errors.invalid(
            f"{path}.bindTimeoutSeconds",
            timeout,
            "invalid BindTimeoutSeconds, should not be a negative value",
        )
    return None


def volume_binding_shape(
    args: Args, path: str, capacity_scoring: bool
) -> tuple[tuple[tuple[int, int], ...] | None, ConfigError | None]:
    """VolumeBindingArgs.shape as kube-scheduler defaults and validates it, by the gate
    StorageCapacityScoring (``capacity_scoring``): with it on, an empty or missing shape is the
    default (None here: the caller's), any other one must pass validateFunctionShape; with it
    off, a shape given at all (``[]`` too, not ``null``) is refused. ``path`` is the args'.
    Returns (the shape as (utilization, score) points, or None for the default; the error)."""
    shape = args.get("shape")
    if not capacity_scoring:
        if shape is None:
            return None, None
        return None, errors.invalid(
            f"{path}.shape",
            _go_shape(shape),
            "unexpected field `shape`, remove it or turn on the feature gate "
            "StorageCapacityScoring",
        )
    if not shape:
        return None, None  # SetDefaults_VolumeBindingArgs: kube-scheduler's default shape
    problem = validate_shape(list(shape), f"{path}.shape")
    if problem is not None:
        return None, problem
    points = tuple(
        (int((p or {}).get("utilization") or 0), int((p or {}).get("score") or 0)) for p in shape
    )
    return points, None


def _go_shape(shape: Any) -> list[dict[str, int]]:
    """The shape as field.Invalid prints the internal type (json of its Go field names)."""
    return [
        {
            "Utilization": int((p or {}).get("utilization") or 0),
            "Score": int((p or {}).get("score") or 0),
        }
        for p in shape or ()
    ]


def _dynamic_resources(args: Args, path: str, kube: emulation.Emulation) -> ConfigError | None:
    filter_timeout = names.parse_nanoseconds(str(args["filterTimeout"]))
    if filter_timeout is not None and filter_timeout < 0:
        return errors.invalid(
            f"{path}.filterTimeout", names.go_duration(filter_timeout), "must be zero or positive"
        )
    binding = args.get("bindingTimeout")
    row = next(
        (r for r in revisions.rows(revisions.ARGS_FIELD, kube.minor) if r.name == _BINDING),
        None,
    )
    if row is None or binding is None:
        return None
    if not revisions.gates_on(row, kube):
        return errors.forbidden(
            f"{path}.bindingTimeout",
            f"{row.gate} or {row.also_gate} feature gate is disabled",
        )
    timeout = names.parse_nanoseconds(str(binding))
    if timeout is not None and timeout < _SECOND:
        return errors.invalid(
            f"{path}.bindingTimeout", names.go_duration(timeout), "must be at least 1 second"
        )
    return None


_BINDING = "DynamicResources.bindingTimeout"
_SECOND = 1_000_000_000


_VALIDATORS: Mapping[str, Callable[[Args, str], ConfigError | None]] = {
    "DefaultPreemption": _default_preemption,
    "InterPodAffinity": _inter_pod_affinity,
    "NodeAffinity": _node_affinity,
    "NodeResourcesBalancedAllocation": _balanced,
    "PodTopologySpread": _spread,
    "VolumeBinding": _volume_binding,
}
_RELEASE_VALIDATORS: Mapping[
    str, Callable[[Args, str, emulation.Emulation], ConfigError | None]
] = {
    "DynamicResources": _dynamic_resources,
}


# NodeResourcesFit, validated as the plugin is built ----------------------------------------


def validate_fit(
    args: Args, kube: emulation.Emulation = emulation.NEWEST_EMULATION
) -> ConfigError | None:
    """ValidateNodeResourcesFitArgs as NewFit calls it in the release ``kube``: paths
    relative to the args."""
    for i, resource in enumerate(args.get("ignoredResources") or ()):
        problem = _label_name(f"ignoredResources[{i}]", str(resource))
        if problem is not None:
            return problem
    for i, group in enumerate(args.get("ignoredResourceGroups") or ()):
        if "/" in str(group):
            return errors.invalid(
                f"ignoredResourceGroups[{i}]", group, "resource group name can't contain '/'"
            )
        problem = _label_name(f"ignoredResourceGroups[{i}]", str(group))
        if problem is not None:
            return problem
    strategy = args["scoringStrategy"]
    if strategy["type"] not in STRATEGIES:
        return errors.not_supported("scoringStrategy.type", strategy["type"], STRATEGIES)
    for i, resource in enumerate(strategy["resources"]):
        weight = resource["weight"]
        if not 0 < weight <= 100:
            return errors.invalid(
                f"scoringStrategy.resources[{i}].weight",
                weight,
                f"resource weight of {resource['name']} not in valid range (0, 100]",
            )
    ratio = strategy.get("requestedToCapacityRatio")
    if not revisions.applies(revisions.FIT_RATIO_BY_TYPE, kube.minor):
        if ratio is not None:
            # v1.34, v1.35 name the shape scoringStrategy.shape, without requestedToCapacityRatio.
            return validate_shape(list(ratio.get("shape") or ()), "scoringStrategy.shape")
        return None
    if strategy["type"] == REQUESTED_TO_CAPACITY_RATIO:
        if ratio is None:
            return errors.required(
                "scoringStrategy.requestedToCapacityRatio",
                "must be specified when type is RequestedToCapacityRatio",
            )
        return validate_shape(
            list(ratio.get("shape") or ()), "scoringStrategy.requestedToCapacityRatio.shape"
        )
    if ratio is not None:
        return errors.forbidden(
            "scoringStrategy.requestedToCapacityRatio",
            "must be nil when type is not RequestedToCapacityRatio",
        )
    return None


def validate_shape(shape: list[Any], path: str) -> ConfigError | None:
    """validateFunctionShape: at least one point, utilization increasing, in [0, 100], score
    in [0, 10]."""
    if not shape:
        return errors.required(path, "at least one point must be specified")
    points = [
        (int((p or {}).get("utilization") or 0), int((p or {}).get("score") or 0)) for p in shape
    ]
    for i in range(1, len(points)):
        if points[i - 1][0] >= points[i][0]:
            return errors.invalid(
                f"{path}[{i}].utilization",
                points[i][0],
                "values must be sorted in increasing order",
            )
    for i, (utilization, score) in enumerate(points):
        if not 0 <= utilization <= 100:
            return errors.invalid(
                f"{path}[{i}].utilization", utilization, "not in valid range [0, 100]"
            )
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            return errors.invalid(
                f"{path}[{i}].score", score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
            )
    return None


def _label_name(path: str, value: str) -> ConfigError | None:
    problems = names.qualified_name_errors(value)
    return errors.invalid(path, value, problems[0]) if problems else None
