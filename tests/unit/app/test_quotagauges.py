"""The tenant quota gauges' rows from the cache's QuotaStore: per governing quota, cpu and memory
and the resources its min or max names, in base units, the bounds as CapacityScheduling reads
them (a listed bound's missing cpu or memory is 0; an unlimited max has no value)."""

from __future__ import annotations

from collections.abc import Mapping

from plumb.app import quotagauges
from plumb.backend.cache import quotas
from plumb.backend.records import objects, quotaobjects
from plumb.observability.metrics import QuotaRow
from plumb_dev.testing import quotaclient
from plumb_dev.testing.builders import make_pod

GPU = "nvidia.com/gpu"
GI = 2**30


def _quota(
    namespace: str,
    minimum: Mapping[str, str] | None = None,
    maximum: Mapping[str, str] | None = None,
) -> quotaobjects.ElasticQuota:
    body = quotaclient.elastic_quota(namespace, minimum=minimum, maximum=maximum)
    return quotaobjects.parse_quota(body)


def _pod(name: str, namespace: str, **requests: str) -> objects.PodInfo:
    return objects.parse_pod(make_pod(name, namespace).uid(f"uid-{name}").req(**requests).obj())


def _by_key(rows: list[QuotaRow]) -> dict[tuple[str, str], tuple[float, float, float | None]]:
    return {(r.namespace, r.resource): (r.used, r.min, r.max) for r in rows}


def test_rows_give_use_and_bounds_in_base_units() -> None:
    store = quotas.QuotaStore()
    store.put(
        _quota(
            "team-a",
            minimum={"cpu": "2", "memory": "4Gi"},
            maximum={"cpu": "4500m", "memory": "8Gi", GPU: "2"},
        )
    )
    store.place(_pod("a-0", "team-a", cpu="1500m", memory="1Gi"))
    store.place(_pod("a-1", "team-a", cpu="250m", memory="512Mi", **{GPU: "1"}))
    store.place(_pod("free", "elsewhere", cpu="8"))  # no quota governs it: no rows

    assert _by_key(quotagauges.rows(store)) == {
        ("team-a", "cpu"): (1.75, 2.0, 4.5),
        ("team-a", "memory"): (1.5 * GI, 4.0 * GI, 8.0 * GI),
        ("team-a", GPU): (1.0, 0.0, 2.0),  # min leaves it out: 0
    }


def test_missing_names_read_as_capacityscheduling_reads_them() -> None:
    store = quotas.QuotaStore()
    store.put(_quota("only-cpu", maximum={"cpu": "2"}))  # no min; max names cpu alone
    store.put(_quota("unlimited", minimum={"cpu": "1", GPU: "1"}))  # no max at all
    rows = _by_key(quotagauges.rows(store))
    assert rows == {
        ("only-cpu", "cpu"): (0.0, 0.0, 2.0),
        # A max that names some resources lets no memory in: 0, not unlimited.
        ("only-cpu", "memory"): (0.0, 0.0, 0.0),
        ("unlimited", "cpu"): (0.0, 1.0, None),
        ("unlimited", "memory"): (0.0, 0.0, None),
        ("unlimited", GPU): (0.0, 1.0, None),
    }


def test_rows_follow_placements_and_the_governing_quota() -> None:
    store = quotas.QuotaStore()
    store.put(_quota("team-a", minimum={"cpu": "1"}, maximum={"cpu": "2"}))
    pod = _pod("a-0", "team-a", cpu="1")
    store.place(pod)
    assert _by_key(quotagauges.rows(store))[("team-a", "cpu")] == (1.0, 1.0, 2.0)
    store.unplace(pod)
    assert _by_key(quotagauges.rows(store))[("team-a", "cpu")] == (0.0, 1.0, 2.0)
    store.remove("team-a", quotaclient.DEFAULT_NAME)
    assert quotagauges.rows(store) == []
