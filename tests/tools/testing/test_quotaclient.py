"""The ElasticQuota bodies plumb_dev.testing.quotaclient writes for the quota tests."""

from __future__ import annotations

from plumb_dev.testing import quotaclient


def test_a_quota_names_its_min_and_max() -> None:
    body = quotaclient.elastic_quota("team", minimum={"cpu": "2"}, maximum={"cpu": "4"})

    assert body == {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "quota", "namespace": "team"},
        "spec": {"min": {"cpu": "2"}, "max": {"cpu": "4"}},
    }


def test_a_min_or_max_left_out_is_not_in_the_spec() -> None:
    body = quotaclient.elastic_quota("team", maximum={"memory": "1Gi"}, name="ceiling")

    assert body["metadata"]["name"] == "ceiling"
    assert body["spec"] == {"max": {"memory": "1Gi"}}
