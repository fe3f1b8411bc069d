"""The Coscheduling and CapacityScheduling profiles and the PodGroups that
plumb_dev.testing.schedulerplugins writes for scheduler-plugins' kube-scheduler."""

from __future__ import annotations

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the dev dependencies

from plumb_dev.testing import schedulerplugins


def test_the_profile_is_scheduler_plugins_coscheduling_manifest_under_another_name() -> None:
    module = schedulerplugins.module_copy()
    if module is None:
        pytest.skip(reason=schedulerplugins.NOT_DOWNLOADED)
    text = (module / "manifests" / "coscheduling" / "scheduler-config.yaml").read_text()
    (upstream,) = yaml.safe_load(text)["profiles"]
    upstream["schedulerName"] = schedulerplugins.SCHEDULER_NAME

    assert schedulerplugins.profile() == upstream


def test_the_capacity_profile_is_scheduler_plugins_manifest_under_another_name() -> None:
    module = schedulerplugins.module_copy()
    if module is None:
        pytest.skip(reason=schedulerplugins.NOT_DOWNLOADED)
    text = (module / "manifests" / "capacityscheduling" / "scheduler-config.yaml").read_text()
    (upstream,) = yaml.safe_load(text)["profiles"]
    upstream["schedulerName"] = schedulerplugins.CAPACITY_SCHEDULER_NAME

    assert schedulerplugins.capacity_profile() == upstream


def test_the_profile_carries_the_group_backoff_when_asked() -> None:
    (config,) = schedulerplugins.profile("gangs", group_backoff_seconds=5)["pluginConfig"]

    assert config == {
        "name": "Coscheduling",
        "args": {"permitWaitingTimeSeconds": 10, "podGroupBackoffSeconds": 5},
    }


def test_a_pod_group_names_its_minimum_and_timeout() -> None:
    body = schedulerplugins.pod_group("gang", "team", min_member=3, schedule_timeout_seconds=30)

    assert body == {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "gang", "namespace": "team"},
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 30},
    }
