"""A KubeSchedulerConfiguration read as kube-scheduler of the release plumb decides as reads
it (decode, default, validate, build each profile's framework) and turned into plumb's scoring
profiles; what differs between releases is in revisions.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from plumb.backend.records import specs
from plumb.extensions import arguments, enabling, interface, registry
from plumb.extensions import extenders as extenders_module
from plumb.framework import emulation, scoring
from plumb.framework.plugins import volumecapacity
from plumb.framework.schedconfig import args as plugin_args
from plumb.framework.schedconfig import decoding, errors, names, plugins, revisions
from plumb.framework.schedconfig.errors import ConfigError
from plumb.k8s import documents
from plumb.kernel import contract

DEFAULT_SCHEDULER_NAME = "default-scheduler"
SCORE_ORDER = contract.SCORE_PLUGINS
"""Score plugins in the order of scoring.Profile.weights (ZoneHealth is plumb's own: 0 from a
configuration)."""

# VolumeBindingArgs.bindTimeoutSeconds's default: how long plumb's PreBind waits (prebind.py).
_BIND_TIMEOUT = 600
_V1 = decoding.API_VERSION
# kube-scheduler names the version of its list of removed plugins with core/v1's group version
# ("v1"), v1.34.4 to v1.37.2.
_INVALID_PLUGIN = f'was invalid in version "v1" (KubeSchedulerConfiguration is version "{_V1}")'

# Plugins whose Filter (Score) reads state its PreFilter (PreScore) writes and fails every pod
# without it: kube-scheduler accepts such a profile but schedules nothing with it.
_NEEDS_PRE_FILTER = (
    "NodeResourcesFit",
    "InterPodAffinity",
    "PodTopologySpread",
    "NodePorts",
    "VolumeRestrictions",
)
_NEEDS_PRE_SCORE = ("TaintToleration", "InterPodAffinity", "PodTopologySpread")

# Top-level fields plumb accepts and does not use, with why.
_IGNORED_FIELDS = {
    "parallelism": "plumb filters and scores in its own kernel thread",
    "percentageOfNodesToScore": "plumb scores every feasible node",
    "leaderElection": "plumb elects its leader with its own flags (--leader-elect …)",
    "clientConnection": "plumb connects with its own kubeconfig and flags",
    "enableProfiling": "plumb serves no pprof endpoints",
    "enableContentionProfiling": "plumb serves no pprof endpoints",
    "delayCacheUntilActive": "plumb fills its cache before it schedules, leader or not",
}


@dataclasses.dataclass(frozen=True, slots=True)
class Configuration:
    """What plumb takes from a KubeSchedulerConfiguration.

    - ``profiles``: one scoring.Profile per profile, in file order (name = schedulerName,
      config = ``digest``).
    - ``initial_backoff``, ``max_backoff``: podInitialBackoffSeconds and podMaxBackoffSeconds.
    - ``ignored``: one line per field the file sets that plumb accepts and does not use.
    - ``digest``: the first 16 hex digits of the sha256 of the file's bytes.
    - ``extenders``: the HTTP extenders in the order kube-scheduler calls them (those not
      ignorable first, then the ignorable ones, each in file order).
    - ``completed``: each profile as kube-scheduler completes it (what its
      ``--write-config-to`` writes under ``profiles``: the plugins of every extension point
      after defaulting, and the args of each plugin it builds, sorted by name).
    """

    profiles: tuple[scoring.Profile, ...]
    initial_backoff: float
    max_backoff: float
    ignored: tuple[str, ...]
    digest: str
    completed: tuple[Mapping[str, Any], ...] = dataclasses.field(default=(), compare=False)
    extenders: tuple[extenders_module.Extender, ...] = ()


def parse(
    text: str | bytes,
    *,
    kube: emulation.Emulation = emulation.NEWEST_EMULATION,
    extensions: registry.Registry | None = None,
) -> Configuration:
    """Reads a KubeSchedulerConfiguration (YAML or JSON); raises ConfigError where
    kube-scheduler of the release ``kube`` would refuse it (saying so where a later release
    has what the file uses), or where plumb would schedule differently. Every profile decides
    as that release. ``extensions``: the Python plugins a profile may enable (by default
    those installed, extensions/registry.py)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    digest = hashlib.sha256(data).hexdigest()[:16]
    try:
        body = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError("", f"the file is not UTF-8: {error}") from None
    try:
        document, _ = documents.load(body)
    except documents.DocumentError as error:
        raise ConfigError(error.field, error.message, error.text) from None
    decoding.type_meta(document, body)
    if extensions is None:
        extensions = registry.installed(frozenset(plugins.registry()))
    return _read(document, digest, kube, extensions)


def default_profile(
    scheduler_name: str, kube: emulation.Emulation = emulation.NEWEST_EMULATION
) -> scoring.Profile:
    """kube-scheduler's default profile under that schedulerName: what parse() gives for a
    file with that one profile and nothing else, with ``config`` "" (built-in)."""
    document = {
        "apiVersion": decoding.API_VERSION,
        "kind": decoding.KIND,
        "profiles": [{"schedulerName": scheduler_name}],
    }
    return _read(document, "", kube, registry.EMPTY).profiles[0]


@dataclasses.dataclass(frozen=True, slots=True)
class _Profile:
    """One profile after defaulting: its plugin sets and its pluginConfig (file entries first,
    then the defaults kube-scheduler appends), each as (name, args or None, raw, path)."""

    name: str
    path: str
    raw: Mapping[str, Any]
    sets: Mapping[str, plugins.PluginSet]
    config: tuple[tuple[str, plugin_args.Args | None, Any, str], ...]


def _read(
    document: dict[str, Any],
    digest: str,
    kube: emulation.Emulation,
    extensions: registry.Registry,
) -> Configuration:
    points = [row.name for row in revisions.rows(revisions.POINT, kube.minor)]
    unknown = decoding.check(document, decoding.configuration(points))
    for where in unknown:
        _refuse_later_point(where, kube.minor)
    raw_profiles: list[Any] = list(document.get("profiles") or ())
    nested = _decode_args(raw_profiles, kube)
    if unknown:
        raise decoding.unknown_fields(unknown)
    if nested is not None:
        raise nested
    profiles = _defaulted_profiles(raw_profiles, kube)
    _validate(document, profiles, kube)
    _validate_volume_binding(profiles, kube)
    extenders = _build_extenders(document.get("extenders") or [])
    profiles = _ignore_for_extenders(profiles, extenders)
    frameworks = []
    for profile in profiles:
        frameworks.append(_framework(profile, kube, extensions))
        _same_queue_sort_args(profile, profiles[0])
    ignored: list[str] = [
        f"{field}: {why}"
        for field, why in _IGNORED_FIELDS.items()
        if document.get(field) is not None
    ]
    built = tuple(
        _profile(profile, framework, digest, ignored, kube, extensions)
        for profile, framework in zip(profiles, frameworks, strict=True)
    )
    return Configuration(
        profiles=built,
        initial_backoff=float(_int(document, "podInitialBackoffSeconds", 1)),
        max_backoff=float(_int(document, "podMaxBackoffSeconds", 10)),
        ignored=tuple(ignored),
        digest=digest,
        completed=tuple(_completed(profile, kube) for profile in profiles),
        extenders=extenders_module.ordered(extenders),
    )


def _refuse_later_point(where: str, minor: int) -> None:
    """An unknown ``profiles[i].plugins.<point>`` that a later release has: say so."""
    parent, _, point = where.rpartition(".")
    if not parent.endswith(".plugins"):
        return
    row = revisions.later(revisions.POINT, point, minor)
    if row is not None:
        raise errors.later(where, f"the extension point {point}", row.minor, minor)


def _completed(profile: _Profile, kube: emulation.Emulation) -> dict[str, Any]:
    """The profile in kube-scheduler's v1 form after NewFramework captured it: its plugin sets
    and the args of the in-tree plugins it builds (the file's, else the defaults)."""
    needed = plugins.enabled_names(profile.sets) & plugins.registry(kube.minor).keys()
    config: dict[str, Any] = {}
    for name, args, raw, _ in profile.config:
        if name in needed and name not in config and (args is not None or raw is not None):
            config[name] = raw if args is None else plugin_args.completed(name, args, kube)
    return {
        "schedulerName": profile.name,
        "plugins": {point: plugins.v1(plugin_set) for point, plugin_set in profile.sets.items()},
        "pluginConfig": [{"name": name, "args": config[name]} for name in sorted(config)],
    }


def _int(raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key)
    return default if value is None else int(value)


def _decode_args(raw_profiles: Sequence[Any], kube: emulation.Emulation) -> ConfigError | None:
    """Decodes every pluginConfig's args: a fatal error raises at once, the first strict
    (unknown field) error is returned, as kube-scheduler gathers those."""
    first: ConfigError | None = None
    for i, profile in enumerate(raw_profiles):
        for j, entry in enumerate((profile or {}).get("pluginConfig") or ()):
            entry = entry or {}
            try:
                plugin_args.decode(
                    str(entry.get("name") or ""),
                    entry.get("args"),
                    f"profiles[{i}].pluginConfig[{j}]",
                    kube,
                )
            except ConfigError as error:
                if not str(error).startswith("strict decoding error"):
                    raise
                first = first or error
    return first


def _defaulted_profiles(raw_profiles: Sequence[Any], kube: emulation.Emulation) -> list[_Profile]:
    raws: list[Mapping[str, Any]] = [p or {} for p in raw_profiles] or [{}]
    out: list[_Profile] = []
    for i, raw in enumerate(raws):
        path = f"profiles[{i}]"
        name = raw.get("schedulerName")
        if name is None:
            name = DEFAULT_SCHEDULER_NAME if len(raws) == 1 else ""
        sets = plugins.merged(raw.get("plugins"), f"{path}.plugins", kube)
        config: list[tuple[str, plugin_args.Args | None, Any, str]] = []
        for j, entry in enumerate(raw.get("pluginConfig") or ()):
            entry = entry or {}
            plugin = str(entry.get("name") or "")
            where = f"{path}.pluginConfig[{j}]"
            config.append(
                (
                    plugin,
                    plugin_args.decode(plugin, entry.get("args"), where, kube),
                    entry.get("args"),
                    where,
                )
            )
        configured = {plugin for plugin, _, _, _ in config}
        for plugin in sorted(plugins.args_names(sets, kube.minor)):
            defaults = plugin_args.default(plugin, kube)
            if plugin not in configured and defaults is not None:
                config.append((plugin, defaults, None, ""))
        out.append(_Profile(str(name), path, raw, sets, tuple(config)))
    return out


# Validation (validation.go), the first error in kube-scheduler's order ------------------------


def _validate(
    document: Mapping[str, Any], profiles: Sequence[_Profile], kube: emulation.Emulation
) -> None:
    connection = document.get("clientConnection") or {}
    burst = connection.get("burst")
    if burst is not None and burst < 0:
        raise errors.invalid("clientConnection.burst", burst, "must be non-negative")
    _validate_leader_election(document.get("leaderElection") or {})
    parallelism = _int(document, "parallelism", 16)
    if parallelism <= 0:
        raise errors.invalid(
            "parallelism", parallelism, "should be an integer value greater than zero"
        )
    seen: dict[str, int] = {}
    for i, profile in enumerate(profiles):
        _validate_profile(profile, kube)
        if profile.name in seen:
            raise errors.duplicate(
                f"{profile.path}.schedulerName",
                profile.name,
                f"also profiles[{seen[profile.name]}].schedulerName",
            )
        seen[profile.name] = i
    _validate_queue_sort(profiles)
    _validate_percentage("percentageOfNodesToScore", document.get("percentageOfNodesToScore"))
    initial = _int(document, "podInitialBackoffSeconds", 1)
    maximum = _int(document, "podMaxBackoffSeconds", 10)
    if initial <= 0:
        raise errors.invalid("podInitialBackoffSeconds", initial, "must be greater than 0")
    if maximum < initial:
        raise errors.invalid(
            "podMaxBackoffSeconds",
            maximum,
            "must be greater than or equal to PodInitialBackoffSeconds",
        )
    _validate_extenders(document.get("extenders") or [])


def _validate_volume_binding(profiles: Sequence[_Profile], kube: emulation.Emulation) -> None:
    """VolumeBindingArgs.shape, which kube-scheduler validates by the gate StorageCapacityScoring
    (its default in the release ``kube`` decides as, or --feature-gates)."""
    on = kube.gate(volumecapacity.GATE)
    for profile in profiles:
        for name, args, _, where in profile.config:
            if name == "VolumeBinding" and where and args is not None:
                _shape, problem = plugin_args.volume_binding_shape(args, f"{where}.args", on)
                if problem is not None:
                    raise problem


def _capacity_shape(args: plugin_args.Args, kube: emulation.Emulation) -> volumecapacity.Shape:
    """The storage-capacity score's shape: the file's, else kube-scheduler's default."""
    shape, _problem = plugin_args.volume_binding_shape(args, "", kube.gate(volumecapacity.GATE))
    return shape or volumecapacity.DEFAULT_SHAPE


def _validate_leader_election(raw: Mapping[str, Any]) -> None:
    if raw.get("leaderElect") is False:
        return
    durations = {}
    for key, default in (("leaseDuration", 15.0), ("renewDeadline", 10.0), ("retryPeriod", 2.0)):
        text = raw.get(key)
        seconds = names.parse_duration(text) if text else None
        durations[key] = seconds if seconds else default
    for key in ("leaseDuration", "renewDeadline", "retryPeriod"):
        if durations[key] <= 0:
            raise errors.invalid(f"leaderElection.{key}", raw.get(key), "must be greater than zero")
    if durations["leaseDuration"] <= durations["renewDeadline"]:
        raise errors.invalid(
            "leaderElection.leaseDuration",
            raw.get("renewDeadline"),
            "must be greater than `RenewDeadline`",
        )
    lock = raw.get("resourceLock") or "leases"
    if lock != "leases":
        raise errors.invalid(
            "leaderElection.resourceLock", lock, 'resourceLock value must be "leases"'
        )


def _validate_percentage(field: str, value: Any) -> None:
    if value is not None and not 0 <= value <= 100:
        raise errors.invalid(field, value, "not in valid range [0-100]")


def _validate_profile(profile: _Profile, kube: emulation.Emulation) -> None:
    if not profile.name:
        raise errors.required(f"{profile.path}.schedulerName")
    _validate_percentage(
        f"{profile.path}.percentageOfNodesToScore", profile.raw.get("percentageOfNodesToScore")
    )
    if profile.raw.get("plugins") is not None:
        for point in plugins.validated_points(kube.minor):
            for j, plugin in enumerate(profile.sets[point].enabled):
                if plugin.name in plugins.REMOVED:
                    raise errors.invalid(
                        f"{profile.path}.plugins.{point}.enabled[{j}]", plugin.name, _INVALID_PLUGIN
                    )
    seen: set[str] = set()
    for name, args, _, where in profile.config:
        if not where:
            continue  # a default kube-scheduler added: valid
        if name in seen:
            raise errors.duplicate(where, name)
        seen.add(name)
        if name in plugins.REMOVED:
            raise errors.invalid(where, name, _INVALID_PLUGIN)
        if args is not None:
            problem = plugin_args.validate(name, args, where, kube)
            if problem is not None:
                raise problem


def _queue_sort_key(profile: _Profile) -> tuple[tuple[tuple[str, int], ...], tuple[str, ...]]:
    queue_sort = profile.sets["queueSort"]
    return tuple((p.name, p.weight) for p in queue_sort.enabled), queue_sort.disabled


def _validate_queue_sort(profiles: Sequence[_Profile]) -> None:
    """validateCommonQueueSort: every profile's queueSort set (after defaulting) and the
    queue sort plugin's args must equal the first profile's."""
    first = profiles[0]
    enabled = first.sets["queueSort"].enabled
    if len(enabled) > 1:
        raise errors.invalid(
            f"{first.path}.plugins.queueSort.Enabled",
            len(enabled),
            "only one queue sort plugin can be enabled",
        )
    name = enabled[0].name if enabled else ""
    first_args = next((raw for n, _, raw, w in first.config if w and n == name), None)
    for profile in profiles[1:]:
        if _queue_sort_key(profile) != _queue_sort_key(first):
            queue_sort = profile.sets["queueSort"]
            shown = {
                "Enabled": [{"Name": p.name, "Weight": p.weight} for p in queue_sort.enabled]
                or None,
                "Disabled": [{"Name": n, "Weight": 0} for n in queue_sort.disabled] or None,
            }
            raise errors.ConfigError(
                f"{profile.path}.plugins.queueSort",
                f"Invalid value: {json.dumps(shown, separators=(',', ':'))}: "
                "must be the same for all profiles",
            )
        for n, _, raw, where in profile.config:
            if where and name and n == name and raw != first_args:
                raise errors.invalid(
                    f"{profile.path}.pluginConfig.args",
                    raw,
                    "queueSort must be the same for all profiles",
                )


def _validate_extenders(extenders: Sequence[Any]) -> None:
    binders = 0
    managed: set[str] = set()
    for i, extender in enumerate(extenders):
        extender = extender or {}
        path = f"extenders[{i}]"
        weight = int(extender.get("weight") or 0)
        if extender.get("prioritizeVerb") and weight <= 0:
            raise errors.invalid(
                f"{path}.weight", weight, "must have a positive weight applied to it"
            )
        if extender.get("bindVerb"):
            binders += 1
        for j, resource in enumerate(extender.get("managedResources") or ()):
            name = str((resource or {}).get("name") or "")
            where = f"{path}.managedResources[{j}].name"
            problems = names.qualified_name_errors(name)
            if problems:
                raise errors.invalid(where, name, problems[0])
            if not names.is_extended_resource_name(name):
                raise errors.invalid(where, name, "is an invalid extended resource name")
            if name in managed:
                raise errors.invalid(where, name, "duplicate extender managed resource name")
            managed.add(name)
    if binders > 1:
        raise errors.invalid(
            "extenders",
            f"found {binders} extenders implementing bind",
            "only one extender can implement bind",
        )


# The extenders (buildExtenders, before any framework is built) ------------------------------


def _build_extenders(raw: Sequence[Any]) -> tuple[extenders_module.Extender, ...]:
    """Each extender as NewHTTPExtender builds it, in file order; its TLS settings refused in
    kube-scheduler's words ("couldn't build extenders: ..."), plumb adding where."""
    built = []
    for i, entry in enumerate(raw):
        extender = _extender(entry or {})
        problem = extenders_module.tls_problem(extender)
        if problem is not None:
            where = f"extenders[{i}].tlsConfig"
            raise ConfigError(where, problem, f"couldn't build extenders: {problem} (at {where})")
        built.append(extender)
    return tuple(built)


def _extender(raw: Mapping[str, Any]) -> extenders_module.Extender:
    tls_raw = raw.get("tlsConfig")
    tls = None
    if tls_raw is not None:
        tls = extenders_module.Tls(
            insecure=bool(tls_raw.get("insecure")),
            server_name=str(tls_raw.get("serverName") or ""),
            cert_file=str(tls_raw.get("certFile") or ""),
            key_file=str(tls_raw.get("keyFile") or ""),
            ca_file=str(tls_raw.get("caFile") or ""),
            cert_data=decoding.base64_bytes(str(tls_raw.get("certData") or "")),
            key_data=decoding.base64_bytes(str(tls_raw.get("keyData") or "")),
            ca_data=decoding.base64_bytes(str(tls_raw.get("caData") or "")),
        )
    # 0 (or unset) is NewHTTPExtender's default; a negative timeout is none at all (Go's
    # http.Client sets a deadline only for a positive one).
    nanoseconds = names.parse_nanoseconds(str(raw.get("httpTimeout") or "0s")) or 0
    timeout: float | None = nanoseconds / 1e9 if nanoseconds > 0 else None
    if nanoseconds == 0:
        timeout = extenders_module.DEFAULT_TIMEOUT
    return extenders_module.Extender(
        url_prefix=str(raw.get("urlPrefix") or ""),
        filter_verb=str(raw.get("filterVerb") or ""),
        prioritize_verb=str(raw.get("prioritizeVerb") or ""),
        preempt_verb=str(raw.get("preemptVerb") or ""),
        bind_verb=str(raw.get("bindVerb") or ""),
        weight=int(raw.get("weight") or 0),
        enable_https=bool(raw.get("enableHTTPS")),
        tls=tls,
        http_timeout=timeout,
        node_cache_capable=bool(raw.get("nodeCacheCapable")),
        managed_resources=tuple(
            extenders_module.ManagedResource(
                name=str(r.get("name") or ""),
                ignored_by_scheduler=bool(r.get("ignoredByScheduler")),
            )
            for r in (item or {} for item in raw.get("managedResources") or ())
        ),
        ignorable=bool(raw.get("ignorable")),
    )


def _ignore_for_extenders(
    profiles: Sequence[_Profile], extenders: Sequence[extenders_module.Extender]
) -> list[_Profile]:
    """The extenders' ignoredByScheduler resources replace every profile's NodeResourcesFit
    ignoredResources (its first pluginConfig entry's); a profile without NodeResourcesFit
    args (the plugin disabled) fails kube-scheduler's start."""
    names = list(extenders_module.ignored_by_scheduler(extenders))
    if not names:
        return list(profiles)
    out = []
    for profile in profiles:
        config = list(profile.config)
        k = next((k for k, entry in enumerate(config) if entry[0] == "NodeResourcesFit"), None)
        if k is None:
            where = f"{profile.path}.pluginConfig"
            message = "can't find NodeResourcesFitArgs in plugin config"
            raise ConfigError(where, message, f"couldn't build extenders: {message} (at {where})")
        name, args, raw, where = config[k]
        config[k] = (name, {**(args or {}), "ignoredResources": names}, raw, where)
        out.append(dataclasses.replace(profile, config=tuple(config)))
    return out


# The framework (NewFramework) and plumb's own refusals -------------------------------------


def _framework(
    profile: _Profile, kube: emulation.Emulation, extensions: registry.Registry
) -> plugins.Framework:
    needed = plugins.enabled_names(profile.sets)
    if "NodeResourcesFit" in needed:
        _build_fit(profile, kube)
    configured = {name for name, args, _, _ in profile.config if args is not None}
    for name in sorted(needed - plugins.args_names(profile.sets, kube.minor) - configured):
        if plugin_args.schema(name, kube.minor) is not None:
            # Enabled only where plugins get no default args (v1.37's podGroupPostFilter):
            # its factory gets none (DefaultPreemption's and DynamicResources' words).
            where = next(
                plugin.path
                for plugin_set in profile.sets.values()
                for plugin in plugin_set.enabled
                if plugin.name == name
            )
            raise errors.framework(
                where or f"{profile.path}.plugins",
                profile.name,
                f'initializing plugin "{name}": got args of type <nil>, want *{name}Args',
            )
    framework = plugins.build(
        profile.sets, profile.name, profile.path, kube, extensions.config_points()
    )
    _refuse_what_plumb_cannot_do(profile, framework, kube)
    return framework


def _same_queue_sort_args(profile: _Profile, first: _Profile) -> None:
    """profile.NewMap's check: the queue sort plugin's (PrioritySort's) first pluginConfig
    entry must carry the same args in every profile (checked as each profile is built)."""

    def entry(of: _Profile) -> tuple[Any, str]:
        for name, _, raw, where in of.config:
            if where and name == "PrioritySort":
                return raw, where
        return None, ""

    raw, where = entry(profile)
    if raw != entry(first)[0]:
        raise errors.ConfigError(
            f"{where or profile.path + '.pluginConfig'}.args",
            f'different queue sort plugin args for profile "{profile.name}"',
            f'initializing profiles: different queue sort plugin args for profile "{profile.name}"'
            f" (at {where or profile.path + '.pluginConfig'}.args)",
        )


def _args(profile: _Profile, name: str, kube: emulation.Emulation) -> tuple[plugin_args.Args, str]:
    """The args the plugin is built with (the file's, else kube-scheduler's defaults) and the
    path of the file's entry ("" for defaults)."""
    for plugin, args, _, where in profile.config:
        if plugin == name and args is not None:
            return args, where
    defaults = plugin_args.default(name, kube)
    assert defaults is not None, name
    return defaults, ""


def _build_fit(profile: _Profile, kube: emulation.Emulation) -> None:
    args, where = _args(profile, "NodeResourcesFit", kube)
    base = f"{where or profile.path + '.pluginConfig'}.args"
    problem = plugin_args.validate_fit(args, kube)
    if problem is not None:
        raise ConfigError(
            f"{base}.{problem.field}",
            problem.message,
            f"initializing profiles: creating profile for scheduler name {profile.name}: "
            f'initializing plugin "NodeResourcesFit": {problem} (at {base}.{problem.field})',
        )
    strategy = args["scoringStrategy"]
    if (
        strategy["type"] == plugin_args.REQUESTED_TO_CAPACITY_RATIO
        and strategy.get("requestedToCapacityRatio") is None
    ):
        # Only before v1.36, whose validation refuses it (revisions.FIT_RATIO_BY_TYPE).
        raise errors.required(
            f"{base}.scoringStrategy.requestedToCapacityRatio",
            f"kube-scheduler v{kube.version} panics (nil pointer dereference) building "
            "NodeResourcesFit with RequestedToCapacityRatio and no requestedToCapacityRatio.shape",
        )


def _refuse_what_plumb_cannot_do(
    profile: _Profile, framework: plugins.Framework, kube: emulation.Emulation
) -> None:
    points = framework.points
    where = f"{profile.path}.plugins"
    if "SchedulingGates" not in points["preEnqueue"]:
        raise errors.plumb(
            f"{where}.preEnqueue",
            "SchedulingGates is disabled; plumb always holds pods that carry schedulingGates",
        )
    for name in _NEEDS_PRE_FILTER:
        if name in points["filter"] and name not in points["preFilter"]:
            raise errors.plumb(
                f"{where}.preFilter",
                f"{name} runs at filter but not at preFilter; kube-scheduler's {name} filter "
                "then fails every pod; enable it at both or disable both",
            )
    for name in _NEEDS_PRE_SCORE:
        if name in points["score"] and name not in points["preScore"]:
            raise errors.plumb(
                f"{where}.preScore",
                f"{name} runs at score but not at preScore; kube-scheduler's {name} score then "
                "fails every pod; enable it at both or disable both",
            )
    for name in points["score"]:
        weight = framework.weights[name]
        if weight < 0:
            raise errors.plumb(
                framework.weight_paths[name],
                f"{name} weighs {weight}; kube-scheduler's overflow check lets a negative weight "
                "through only as the last score plugin; plumb takes weights of 1 or more",
            )
    args, entry = _args(profile, "InterPodAffinity", kube)
    if "InterPodAffinity" in points["score"] and args.get("ignorePreferredTermsOfExistingPods"):
        raise errors.plumb(
            f"{entry}.args.ignorePreferredTermsOfExistingPods",
            "plumb always scores existing pods' preferred (anti-)affinity terms",
        )


# Mapping to scoring.Profile ------------------------------------------------------------------


def _profile(
    profile: _Profile,
    framework: plugins.Framework,
    digest: str,
    ignored: list[str],
    kube: emulation.Emulation,
    extensions: registry.Registry,
) -> scoring.Profile:
    points = framework.points
    needed = plugins.enabled_names(profile.sets)
    enabled = _extensions(profile, framework, extensions)
    _note_args(profile, needed, ignored, frozenset(e.name for e in enabled))
    _note_plugins(profile, kube, ignored)
    if profile.raw.get("percentageOfNodesToScore") is not None:
        ignored.append(f"{profile.path}.percentageOfNodesToScore: plumb scores every feasible node")
    weights = tuple(
        framework.weights[name] if name in points["score"] else 0 for name in SCORE_ORDER
    )

    def used(name: str) -> plugin_args.Args:
        # The args a plugin runs with; a plugin not enabled keeps kube-scheduler's defaults.
        if name in needed:
            return _args(profile, name, kube)[0]
        defaults = plugin_args.default(name, kube)
        assert defaults is not None, name
        return defaults

    fit = used("NodeResourcesFit")
    strategy = fit["scoringStrategy"]
    shape: tuple[tuple[int, int], ...] = ()
    if strategy["type"] == plugin_args.REQUESTED_TO_CAPACITY_RATIO:
        shape = tuple(
            (int(p.get("utilization") or 0), int(p.get("score") or 0))
            for p in strategy["requestedToCapacityRatio"].get("shape") or ()
        )
    balanced = used("NodeResourcesBalancedAllocation")
    spread = used("PodTopologySpread")
    defaults: tuple[specs.SpreadConstraint, ...] = ()
    if spread["defaultingType"] == plugin_args.LIST_DEFAULTING:
        defaults = tuple(_spread(c) for c in spread.get("defaultConstraints") or ())
    inter_pod = used("InterPodAffinity")
    required, preferred = _added_affinity(used("NodeAffinity"))
    capacity_shape = _capacity_shape(used("VolumeBinding"), kube)
    return scoring.Profile(
        name=profile.name,
        config=digest,
        weights=weights,
        filters=frozenset(name for name in points["filter"] if name in scoring.FILTERS),
        preemption="DefaultPreemption" in points["postFilter"],
        strategy=strategy["type"],
        fit_resources=tuple((r["name"], int(r["weight"])) for r in strategy["resources"]),
        fit_shape=shape,
        fit_ignored=frozenset(fit.get("ignoredResources") or ()),
        fit_ignored_groups=frozenset(fit.get("ignoredResourceGroups") or ()),
        balanced_resources=tuple((r["name"], int(r["weight"])) for r in balanced["resources"]),
        spread_defaulting=spread["defaultingType"],
        spread_defaults=defaults,
        hard_pod_affinity_weight=int(inter_pod["hardPodAffinityWeight"]),
        added_required=required,
        added_preferred=preferred,
        kube=kube,
        capacity_shape=capacity_shape,
        extensions=enabled,
    )


def _extensions(
    profile: _Profile, framework: plugins.Framework, extensions: registry.Registry
) -> tuple[enabling.Enabled, ...]:
    """The Python plugins the profile enables, in the order of their first extension point,
    each with its args decoded (the first pluginConfig entry naming it, as kube-scheduler
    reads one), refused naming the field where they do not fit."""
    usable = extensions.usable()
    order: list[str] = []
    for point in framework.points.values():
        order.extend(name for name in point if name in usable and name not in order)
    found = []
    for name in order:
        installed = usable[name]
        points = frozenset(
            point
            for point, config_point in registry.CONFIG_POINTS.items()
            if name in framework.points.get(config_point, ())
        )
        raw, where = next(
            ((raw, where) for entry, _, raw, where in profile.config if entry == name and where),
            (None, ""),
        )
        weight = framework.weights.get(name, 0) if interface.SCORE in points else 0
        try:
            found.append(enabling.enable(installed, points, weight, raw))
        except arguments.ArgsError as error:
            field = f"{where}.args" if where else f"{profile.path}.pluginConfig"
            if error.field:
                field = f"{field}.{error.field}"
            raise ConfigError(
                field, f"the plugin {name} ({installed.entry}) refuses its args: {error.message}"
            ) from None
    return tuple(found)


def _note_args(
    profile: _Profile, needed: set[str], ignored: list[str], extensions: frozenset[str]
) -> None:
    for name, args, _, where in profile.config:
        if not where or name in extensions:
            continue  # a default, or a Python plugin's (read as it is enabled)
        if args is None:
            ignored.append(
                f"{where}.args: {name!r} has no arguments kube-scheduler reads; it ignores them too"
            )
            continue
        if name not in needed:
            ignored.append(f"{where}.args: {name} is not enabled; kube-scheduler ignores them too")
            continue
        if name == "DefaultPreemption":
            ignored.append(f"{where}.args: plumb's preemption searches every node")
        elif name == "VolumeBinding" and args["bindTimeoutSeconds"] != _BIND_TIMEOUT:
            ignored.append(
                f"{where}.args.bindTimeoutSeconds: plumb waits for the PV controller "
                f"{_BIND_TIMEOUT} s, the default"
            )
        elif name == "DynamicResources":
            ignored.append(f"{where}.args: plumb does not allocate resource claims")


def _note_plugins(profile: _Profile, kube: emulation.Emulation, ignored: list[str]) -> None:
    """A line for each plugin the file enables that changes nothing under the gates plumb
    decides with (revisions.py's PLUGIN rows say why), and for each plugin it enables at a
    pod group's extension point."""
    inert = {row.name: row.inert for row in revisions.rows(revisions.PLUGIN, kube.minor)}
    group_points = {row.name for row in revisions.rows(revisions.POINT, kube.minor)}
    for point, plugin_set in profile.sets.items():
        for plugin in plugin_set.enabled:
            if not plugin.path:
                continue  # a default
            if inert.get(plugin.name):
                ignored.append(
                    f"{plugin.path}: {plugin.name} changes nothing: {inert[plugin.name]}"
                )
            elif point in group_points:
                ignored.append(
                    f"{plugin.path}: {point} runs for pod groups only (gate GenericWorkload, off)"
                )


def _spread(raw: Mapping[str, Any]) -> specs.SpreadConstraint:
    min_domains = raw.get("minDomains")
    return specs.SpreadConstraint(
        max_skew=int(raw["maxSkew"]),
        topology_key=str(raw["topologyKey"]),
        when_unsatisfiable=str(raw["whenUnsatisfiable"]),
        selector=None,
        min_domains=int(min_domains) if min_domains is not None else 1,
        node_affinity_policy=str(raw.get("nodeAffinityPolicy") or "Honor"),
        node_taints_policy=str(raw.get("nodeTaintsPolicy") or "Ignore"),
        match_label_keys=tuple(str(k) for k in raw.get("matchLabelKeys") or ()),
    )


def _added_affinity(
    args: Mapping[str, Any],
) -> tuple[
    tuple[specs.NodeSelectorTerm, ...] | None, tuple[tuple[int, specs.NodeSelectorTerm], ...]
]:
    """NodeAffinityArgs.addedAffinity as plumb's terms; empty terms (and weight-0 preferred
    ones) are dropped, as kube-scheduler skips them (an empty required term matches no node)."""
    affinity = args.get("addedAffinity")
    if affinity is None:
        return None, ()
    required_raw = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = None
    if required_raw is not None:
        required = tuple(
            _term(term or {})
            for term in required_raw.get("nodeSelectorTerms") or ()
            if not plugin_args.is_empty_term(term or {})
        )
    preferred = tuple(
        (int(p["weight"]), _term(p.get("preference") or {}))
        for p in (
            item or {}
            for item in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        )
        if p.get("weight") and not plugin_args.is_empty_term(p.get("preference") or {})
    )
    return required, preferred


def _term(raw: Mapping[str, Any]) -> specs.NodeSelectorTerm:
    def requirement(item: Any) -> specs.Requirement:
        item = item or {}
        return specs.Requirement(
            str(item.get("key") or ""),
            str(item.get("operator") or ""),
            tuple(str(v) for v in item.get("values") or ()),
        )

    return specs.NodeSelectorTerm(
        expressions=tuple(requirement(e) for e in raw.get("matchExpressions") or ()),
        fields=tuple(requirement(e) for e in raw.get("matchFields") or ()),
    )
