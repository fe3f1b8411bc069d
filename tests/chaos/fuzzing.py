"""Hypothesis strategies for scenario 6: SchedulingPolicies (valid, invalid, and valid but odd)
and odd pod specs for plumb, drawn up front as a deterministic list (``draw``) and only then
sent to the API server.

Each drawn object carries its ``kind`` (what the generator meant it to be) so that the scenario
can report how each kind ended; the scenario's assertions hold for every object whatever its
kind: refused by the API server, or seen through by plumb (a status on a policy, a binding or a
FailedScheduling reason on a pod).

The values aim at the edges: quantities far beyond int64 and below a millicore, resources no
node offers, node affinity trees of hundreds of requirements, 63- and 64-character label values,
thousands of tolerations, spread constraints on labels no node has; budgets of 10,000
deviations, 1 ms windows, durations and numbers just outside the schema's limits, and fields
the schema does not know.
"""

from __future__ import annotations

import copy
import dataclasses
import string
from typing import Any, TypeVar, cast

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from plumb_dev.testing import builders

JSON = dict[str, Any]
T = TypeVar("T")

API_VERSION = "scheduling.plumb.dev/v1alpha1"
APP = "plumb.test/fuzz-app"  # the label the fuzzed policies select the fuzzed pods by
APPS = ("a", "b", "c", "d", "e")
DISK = "plumb.test/disk"  # fuzz-lane nodes: ssd or hdd
RANK = "plumb.test/rank"  # fuzz-lane nodes: "1", "5" or "9" (for Gt and Lt)
NOWHERE = "example.com/nowhere"  # a label no node has
EXTENDED = "example.com/foo"  # one fuzz-lane node offers 8
UNOFFERED = "example.com/bar"  # no node offers it
KEYS = (builders.ZONE_LABEL, builders.HOSTNAME_LABEL, DISK, RANK, NOWHERE)


def draw(strategy: st.SearchStrategy[T], count: int, *, salt: int) -> list[T]:
    """count examples of strategy, the same ones on every run (for a given salt).

    Each example of a ``@given`` run is collected; the run's first examples are Hypothesis's
    simplest, the later ones as varied as it makes them. Generation only: nothing fails, so
    nothing shrinks, and no database is read or written.
    """
    found: list[T] = []
    for attempt in range(20):
        if len(found) >= count:
            break

        @seed(salt * 1000 + attempt)
        @settings(
            max_examples=count - len(found),
            database=None,
            deadline=None,
            derandomize=False,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def collect(example: T) -> None:
            found.append(example)

        collect()
    assert len(found) >= count, f"Hypothesis gave {len(found)} examples of {count}"
    return found[:count]


# Shared pieces ---------------------------------------------------------------------------------

_LABEL_CHARS = string.ascii_letters + string.digits + "-_."
_ALNUM = string.ascii_lowercase + string.digits


@st.composite
def label_value(draw_: st.DrawFn, *, sizes: tuple[int, ...] = (1, 8, 62, 63)) -> str:
    """A label value of one of sizes characters: alphanumerics at both ends."""
    size = draw_(st.sampled_from(sizes))
    if size <= 2:
        return draw_(st.text(_ALNUM, min_size=size, max_size=size))
    middle = draw_(st.text(_LABEL_CHARS, min_size=size - 2, max_size=size - 2))
    ends = draw_(st.text(_ALNUM, min_size=2, max_size=2))
    return ends[0] + middle + ends[1]


def durations() -> st.SearchStrategy[str]:
    """Durations the schema accepts: 1 to 4 parts, the total within (0, 24h]."""
    return st.one_of(
        st.sampled_from(["1ms", "1s", "30s", "5m", "10m", "1h30m", "24h", "1439m", "86400s"]),
        st.builds(lambda n, unit: f"{n}{unit}", st.integers(1, 59), st.sampled_from("sm")),
        st.builds(lambda n: f"{n}h", st.integers(1, 24)),
    )


# SchedulingPolicies ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicyCase:
    """A SchedulingPolicy to create; ``strict``: sent with fieldValidation=Strict (unknown
    fields refused) rather than the server's default (dropped, with a warning)."""

    kind: str  # valid, odd or invalid
    spec: Any
    strict: bool
    what: str  # a few words on what is odd or invalid about it

    def body(self, namespace: str, name: str) -> JSON:
        return {
            "apiVersion": API_VERSION,
            "kind": "SchedulingPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": self.spec,
        }


@st.composite
def _selector(draw_: st.DrawFn) -> JSON:
    if draw_(st.booleans()):
        return {"matchLabels": {APP: draw_(st.sampled_from(APPS))}}
    values = draw_(st.lists(st.sampled_from(APPS), min_size=1, max_size=3, unique=True))
    return {"matchExpressions": [{"key": APP, "operator": "In", "values": values}]}


@st.composite
def _topology(draw_: st.DrawFn) -> list[JSON]:
    keys = draw_(st.lists(st.sampled_from(KEYS), max_size=3, unique=True))
    entries = []
    for key in keys:
        entry: JSON = {"topologyKey": key, "maxSkew": draw_(st.sampled_from([1, 2, 5, 2**31 - 1]))}
        hard = draw_(st.booleans())
        entry["whenUnsatisfiable"] = "DoNotSchedule" if hard else "ScheduleAnyway"
        if hard and draw_(st.booleans()):
            entry["minDomains"] = draw_(st.sampled_from([1, 3, 4, 2**31 - 1]))
        entries.append(entry)
    return entries


@st.composite
def _budget(draw_: st.DrawFn) -> JSON:
    return {
        "maxViolations": draw_(st.sampled_from([0, 1, 3, 10000])),
        "window": draw_(durations()),
        "failureRateThreshold": draw_(
            st.one_of(
                st.sampled_from([1, 1.0, 0.15, 5e-324]),
                st.floats(min_value=0, max_value=1, exclude_min=True),
            )
        ),
        "onExhausted": draw_(st.sampled_from(["Block", "Revert"])),
    }


@st.composite
def valid_spec(draw_: st.DrawFn) -> JSON:
    """A spec the schema accepts, with any subset of the optional sections."""
    spec: JSON = {"selector": draw_(_selector())}
    if draw_(st.booleans()):
        spec["priority"] = draw_(st.integers(-(10**9), 10**9))
    if draw_(st.booleans()):
        spec["topology"] = draw_(_topology())
    if draw_(st.booleans()):
        weights = ("resources", "balance", "spread", "affinity", "taints", "zoneHealth")
        spec["scoring"] = {
            "strategy": draw_(
                st.sampled_from(["LeastAllocated", "MostAllocated", "BalancedAllocation"])
            ),
            "weights": {w: draw_(st.integers(0, 100)) for w in weights if draw_(st.booleans())},
        }
    if draw_(st.booleans()):
        window = draw_(durations())
        spec["zoneHealth"] = {
            "topologyKey": draw_(st.sampled_from(KEYS)),
            "window": window,
            "staleAfter": draw_(st.sampled_from([window, "1ms"])),
        }
    if draw_(st.booleans()):
        spec["deviationBudget"] = draw_(_budget())
    if draw_(st.booleans()):
        spec["preemption"] = {
            "exemptQoS": draw_(
                st.lists(st.sampled_from(["Guaranteed", "Burstable", "BestEffort"]), unique=True)
            ),
            "victimOrder": draw_(st.sampled_from(["Priority", "QoSThenPriority"])),
            "scope": draw_(st.sampled_from(["Cluster", "SameNamespace"])),
            "maxVictimsPerPod": draw_(st.sampled_from([1, 3, 10000])),
        }
    return spec


def _set(spec: JSON, path: str, value: Any) -> JSON:
    """spec with the dotted path set (lists by index; missing maps made)."""
    node: Any = spec
    *parents, last = path.split(".")
    for part in parents:
        if isinstance(node, list):
            node = node[int(part)]
        else:
            node = node.setdefault(part, [] if part == "topology" else {})
    if isinstance(node, list):
        while len(node) <= int(last):
            node.append({"topologyKey": NOWHERE})
        node[int(last)] = value
    else:
        node[last] = value
    return spec


# (path, value, what): each makes a valid spec one the API server must refuse.
_INVALID: tuple[tuple[str, Any, str], ...] = (
    ("topology.0", {"topologyKey": builders.ZONE_LABEL, "maxSkew": 0}, "maxSkew 0"),
    ("topology.0", {"topologyKey": builders.ZONE_LABEL, "maxSkew": -3}, "maxSkew negative"),
    ("topology.0", {"topologyKey": builders.ZONE_LABEL, "maxSkew": 2**31}, "maxSkew past int32"),
    ("topology.0", {"topologyKey": "", "maxSkew": 1}, "empty topologyKey"),
    ("topology.0", {"topologyKey": "-bad-", "maxSkew": 1}, "topologyKey not a label key"),
    ("topology.0", {"topologyKey": NOWHERE, "whenUnsatisfiable": "Sometimes"}, "unknown enum"),
    (
        "topology.0",
        {"topologyKey": NOWHERE, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2},
        "minDomains with ScheduleAnyway",
    ),
    ("topology", "zone please", "a string for a list"),
    ("topology", [{"topologyKey": f"k{i}"} for i in range(9)], "9 topology entries"),
    ("topology", [{"topologyKey": NOWHERE}, {"topologyKey": NOWHERE}], "duplicate topologyKey"),
    ("priority", 2**31, "priority past int32"),
    ("priority", "high", "a string for priority"),
    ("scoring.weights.spread", 101, "weight 101"),
    ("scoring.weights.taints", -1, "weight -1"),
    ("scoring.strategy", "Random", "unknown strategy"),
    ("zoneHealth.window", "0s", "zero window"),
    ("zoneHealth.window", "25h", "window past 24h"),
    ("zoneHealth.staleAfter", "99999h", "staleAfter of 99999h"),
    ("deviationBudget.window", "0ms", "zero budget window"),
    ("deviationBudget.window", "1.5h", "fractional duration"),
    ("deviationBudget.window", "ten minutes", "duration in words"),
    ("deviationBudget.window", "1d", "days"),
    ("deviationBudget.window", "", "empty duration"),
    ("deviationBudget.maxViolations", 10001, "maxViolations 10001"),
    ("deviationBudget.maxViolations", -1, "maxViolations -1"),
    ("deviationBudget.failureRateThreshold", 0, "threshold 0"),
    ("deviationBudget.failureRateThreshold", 1.5, "threshold 1.5"),
    ("deviationBudget.onExhausted", "Panic", "unknown onExhausted"),
    ("preemption.exemptQoS", ["Guaranteed", "Guaranteed"], "duplicate QoS"),
    ("preemption.maxVictimsPerPod", 0, "maxVictimsPerPod 0"),
    ("preemption.victimOrder", "Random", "unknown victimOrder"),
    ("selector", {}, "empty selector"),
    ("selector", {"matchLabels": {"-web": "x"}}, "bad label key"),
    ("selector", {"matchLabels": {APP: "x" * 64}}, "64-character label value"),
    ("selector", {"matchExpressions": [{"key": APP, "operator": "Near"}]}, "unknown operator"),
    ("selector", {"matchExpressions": [{"key": APP, "operator": "In"}]}, "In without values"),
    (
        "selector",
        {"matchExpressions": [{"key": APP, "operator": "Exists", "values": ["a"]}]},
        "Exists with values",
    ),
    ("selector", "app=web", "a string for the selector"),
)


@st.composite
def invalid_policy(draw_: st.DrawFn) -> PolicyCase:
    path, value, what = draw_(st.sampled_from(_INVALID))
    spec = _set(draw_(valid_spec()), path, copy.deepcopy(value))
    return PolicyCase(kind="invalid", spec=spec, strict=draw_(st.booleans()), what=what)


_WEIGHTS = ("resources", "balance", "spread", "affinity", "taints", "zoneHealth")

# (path, value, what): each keeps a valid spec valid but takes it to an edge.
_ODD: tuple[tuple[str, Any, str], ...] = (
    ("deviationBudget.maxViolations", 10000, "budget of 10000 deviations"),
    ("deviationBudget.window", "1ms", "1 ms budget window"),
    ("deviationBudget.window", "24h", "24 h budget window"),
    ("zoneHealth", {"window": "1ms", "staleAfter": "1ms"}, "1 ms zone health window"),
    ("deviationBudget", {"maxViolations": 0}, "budget that allows none"),
    ("scoring.weights", dict.fromkeys(_WEIGHTS, 0), "every weight 0"),
    ("scoring.weights", dict.fromkeys(_WEIGHTS, 100), "every weight 100"),
    ("priority", 10**9, "priority at the limit"),
    (
        "topology",
        [{"topologyKey": builders.ZONE_LABEL, "maxSkew": 2**31 - 1, "minDomains": 2**31 - 1}],
        "maxSkew and minDomains at int32 max",
    ),
    ("topology", [{"topologyKey": NOWHERE, "maxSkew": 1}], "spread on a label no node has"),
    ("topology", [{"topologyKey": f"example.com/k{i}"} for i in range(8)], "8 topology entries"),
    (
        "selector",
        {"matchLabels": {f"example.com/l{i}": "v" * 63 for i in range(32)}},
        "32 labels of 63 characters",
    ),
    (
        "selector",
        {
            "matchExpressions": [
                {"key": f"l{i}", "operator": "NotIn", "values": [f"v{j}" for j in range(64)]}
                for i in range(32)
            ]
        },
        "32 expressions of 64 values",
    ),
    ("maxskew", 1, "unknown top-level field"),
    ("deviationBudget.budget", "lots", "unknown nested field"),
)


@st.composite
def odd_policy(draw_: st.DrawFn) -> PolicyCase:
    edits = draw_(st.lists(st.sampled_from(_ODD), min_size=1, max_size=3, unique_by=lambda e: e[2]))
    spec = draw_(valid_spec())
    for path, value, _ in edits:
        spec = _set(spec, path, copy.deepcopy(value))
    # A later edit may replace the section an unknown field went into: look at the result.
    unknown = "maxskew" in spec or "budget" in (spec.get("deviationBudget") or {})
    # An unknown field sent strictly is refused; sent leniently, it is dropped.
    strict = unknown and draw_(st.booleans())
    what = ", ".join(what for _, _, what in edits)
    return PolicyCase(kind="invalid" if strict else "odd", spec=spec, strict=strict, what=what)


def expected_ready(case: PolicyCase) -> str:
    """The Ready condition plumb should report on a policy the API server accepted: False with
    reason InvalidSpec for one meant to be invalid (the schema let it through; plumb must say
    so), False with reason TopologyKeyNotFound when a DoNotSchedule rule names a key no node
    carries (NOWHERE, the example.com/k* keys), else True."""
    if case.kind == "invalid":
        return "False: InvalidSpec"
    for rule in case.spec.get("topology") or []:
        key = str(rule.get("topologyKey", ""))
        hard = rule.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        if hard and (key == NOWHERE or key.startswith("example.com/k")):
            return "False: TopologyKeyNotFound"
    return "True"


def policies() -> st.SearchStrategy[PolicyCase]:
    valid = st.builds(
        lambda spec, strict: PolicyCase(kind="valid", spec=spec, strict=strict, what="valid"),
        valid_spec(),
        st.booleans(),
    )
    return st.one_of(valid, odd_policy(), invalid_policy())


# Pods ------------------------------------------------------------------------------------------

# Quantities at the edges, all of which the API server accepts (for an extended resource only
# the whole ones), and a few it refuses.
_QUANTITIES = (
    "1e18", "1m", "0.000001", "1n", "1u", "0", "1Ei", "8Ei", "9223372036854775807",
    "99999999999999999999", "1e-9", "0.5m", "1.5", "100Ti", "1e3", "1Ki",
)  # fmt: skip
_WHOLE = ("0", "1", "8", "9", "1e18", "1k", "1Ki", "9223372036854775807", "99999999999999999999")
_MALFORMED = ("-1", "1E3", "abc", "1.5.5", "")
_SUFFIXES = ("", "m", "u", "n", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "e18")
RARELY = 12  # one draw in RARELY of a choice with a refused value takes it


def _rarely(draw_: st.DrawFn, usual: st.SearchStrategy[T], refused: st.SearchStrategy[T]) -> T:
    """Mostly a value of usual; one draw in RARELY a value the API server refuses, so that a
    pod with a dozen odd parts is still accepted about half the time."""
    if draw_(st.integers(1, RARELY)) == RARELY:
        return draw_(refused)
    return draw_(usual)


@st.composite
def quantity(draw_: st.DrawFn, *, whole: bool = False) -> str:
    if whole:
        usual = st.sampled_from(_WHOLE)
    elif draw_(st.booleans()):
        usual = st.sampled_from(_QUANTITIES)
    else:
        number = draw_(st.sampled_from([0, 1, 3, 7, 100, 999, 123456789, 10**18]))
        usual = st.sampled_from(_SUFFIXES).map(lambda suffix: f"{number}{suffix}")
    return _rarely(draw_, usual, st.sampled_from(_MALFORMED))


@st.composite
def _requests(draw_: st.DrawFn, *, extended: bool = True) -> dict[str, str]:
    """Requests of some of cpu, memory, ephemeral storage and (with extended, for the main
    container, whose limits the builder sets equal as the API requires) extended resources."""
    names = ["cpu", "memory", "ephemeral-storage"] + ([EXTENDED, UNOFFERED] if extended else [])
    names = draw_(st.lists(st.sampled_from(names), max_size=4, unique=True))
    return {name: draw_(quantity(whole="/" in name)) for name in names}


@st.composite
def _requirement(draw_: st.DrawFn) -> JSON:
    key = draw_(st.sampled_from(KEYS))
    operator = draw_(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    if operator in ("Exists", "DoesNotExist"):
        return builders.expr(key, operator)
    if operator in ("Gt", "Lt"):
        number = _rarely(draw_, st.sampled_from(["0", "3", "7", "99"]), st.just("x"))
        return builders.expr(key, operator, number)
    values = draw_(
        st.lists(
            st.one_of(
                st.sampled_from(["zone-0", "zone-1", "ssd", "hdd", "1", "5", "9"]), label_value()
            ),
            min_size=1,
            max_size=5,
        )
    )
    return builders.expr(key, operator, *values)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodCase:
    """A pod for plumb with an odd spec; ``what`` lists its odd parts."""

    spec_body: JSON
    what: str
    kind: str = "pod"

    def body(self, namespace: str, name: str) -> JSON:
        body = dict(self.spec_body)
        body["metadata"] = {**body["metadata"], "name": name, "namespace": namespace}
        return body


@st.composite
def odd_pod(draw_: st.DrawFn) -> PodCase:
    pod = builders.make_pod("fuzz", "fuzz").scheduler("plumb")
    what = []
    pod = pod.label(APP, draw_(st.sampled_from(APPS)))
    for i in range(draw_(st.integers(0, 2))):
        value = _rarely(draw_, label_value(sizes=(1, 63)), label_value(sizes=(64,)))
        pod = pod.label(f"example.com/l{i}", value)
        what.append(f"label of {len(value)}")
    requests = draw_(_requests())
    if requests:
        pod = pod.req(**requests)
        what.append(f"requests {requests}")
    for i in range(draw_(st.sampled_from([0, 0, 0, 1, 3]))):
        more = draw_(_requests(extended=False))
        pod = pod.container(f"c{i}", **more)
        what.append(f"container {more}")
    if draw_(st.integers(0, 4)) == 4:
        more = draw_(_requests(extended=False))
        # A dict of resource names for **requests: none of them is "sidecar".
        pod = pod.init("init", sidecar=False, **cast(dict[str, Any], more))
        what.append(f"init {more}")
    tolerations = draw_(st.sampled_from([0, 0, 0, 1, 3, 20]))
    if draw_(st.integers(0, 19)) == 19:
        tolerations = draw_(st.sampled_from([1000, 2500]))
    for i in range(tolerations):
        pod = pod.toleration(f"example.com/t{i}", operator="Exists")
    if tolerations:
        what.append(f"{tolerations} tolerations")
    if draw_(st.integers(0, 9)) == 9:
        pod = pod.toleration(operator="Exists")  # tolerates every taint
        what.append("tolerates everything")
    terms = draw_(st.sampled_from([0, 0, 1, 2, 5, 30]))
    if terms:
        per_term = draw_(st.sampled_from([1, 2, 10, 30]))
        for _ in range(terms):
            pod = pod.node_affinity(*draw_(st.lists(_requirement(), min_size=1, max_size=per_term)))
        what.append(f"{terms} node affinity terms of up to {per_term}")
    bad_weight = _rarely(draw_, st.just(None), st.sampled_from([0, 101]))
    for _ in range(draw_(st.sampled_from([0, 0, 1, 10]))):
        weight = bad_weight or draw_(st.sampled_from([1, 50, 100]))
        pod = pod.preferred_node_affinity(weight, draw_(_requirement()))
        what.append(f"preferred node affinity of weight {weight}")
    if draw_(st.integers(0, 3)) == 3:
        pod = pod.node_selector(
            draw_(st.sampled_from(KEYS)),
            draw_(st.one_of(st.sampled_from(["ssd", "zone-1"]), label_value())),
        )
        what.append("nodeSelector")
    for _ in range(draw_(st.sampled_from([0, 0, 1, 3]))):
        hard = draw_(st.booleans())
        skew = _rarely(draw_, st.sampled_from([1, 2, 2**31 - 1]), st.just(0))
        domains = draw_(st.sampled_from([None, 1, 5, 2**31 - 1])) if hard else None
        if _rarely(draw_, st.just(False), st.just(True)):
            domains, hard = 2, False  # minDomains without DoNotSchedule
        key = draw_(st.sampled_from(KEYS))
        pod = pod.spread(
            key,
            skew,
            when="DoNotSchedule" if hard else "ScheduleAnyway",
            selector={APP: draw_(st.sampled_from(APPS))},
            min_domains=domains,
        )
        what.append(f"spread on {key} maxSkew {skew} minDomains {domains} hard {hard}")
    for _ in range(draw_(st.sampled_from([0, 0, 0, 1, 2]))):
        anti = draw_(st.booleans())
        key = draw_(st.sampled_from(KEYS))
        pod = pod.affinity(key, {APP: draw_(st.sampled_from(APPS))}, anti=anti)
        what.append(f"pod {'anti-' if anti else ''}affinity on {key}")
    return PodCase(spec_body=pod.obj(), what="; ".join(what) or "plain")
