"""The kube-scheduler release plumb decides as: from the server's version, pinned, its gates."""

from __future__ import annotations

import re

import pytest

from plumb.framework import emulation


@pytest.mark.parametrize(
    ("git_version", "minor"),
    [
        ("v1.34.4", 34),
        ("v1.35.4", 35),
        ("v1.36.3", 36),
        ("v1.37.2", 37),
        ("v1.37.2-eks-1234", 37),
        ("v1.33.9", 34),  # older than the window: its oldest release
        ("v1.40.0", 37),  # newer: its newest
        ("", 37),  # unknown: the newest
    ],
)
def test_plumb_follows_the_servers_minor_release(git_version: str, minor: int) -> None:
    kube = emulation.for_server(git_version)
    assert kube.minor == minor
    assert kube.server == git_version
    assert not kube.pinned


def test_the_emulated_version_overrides_the_servers() -> None:
    kube = emulation.for_server("v1.37.2", pinned=34)
    assert (kube.minor, kube.pinned) == (34, True)
    assert "pinned by --emulated-version" in kube.describe()


def test_each_change_switches_at_its_release() -> None:
    rows = {
        minor: (
            k.balanced_change,
            k.image_volumes,
            k.preemption_sentence,
            k.pdb_first_violation,
            k.namespace_selector_fixed,
            k.gated_nominations,
            k.resize_pod_totals,
        )
        for minor in emulation.MINORS
        for k in [emulation.emulate(minor)]
    }
    assert rows == {
        34: (False, 0, False, False, False, False, False),
        35: (False, 0, False, False, False, False, False),
        36: (True, 1, False, False, False, False, False),
        37: (True, 2, True, True, True, True, True),
    }


def test_the_preemption_changes_switch_at_their_releases() -> None:
    rows = {
        minor: (
            k.preemption_sentence,
            k.dra_postfilter_sentence,
            k.pdb_first_violation,
            k.deleting_victims_skipped,
            k.gated_nominations,
        )
        for minor in emulation.MINORS
        for k in [emulation.emulate(minor)]
    }
    assert rows == {
        34: (False, True, False, False, False),
        35: (False, True, False, True, False),
        36: (False, True, False, True, False),
        37: (True, False, True, True, True),
    }


def test_gate_defaults_follow_each_releases_features_file() -> None:
    defaults = {
        minor: {
            name: emulation.emulate(minor).gates.get(name)
            for name in ("NodeDeclaredFeatures", "StorageCapacityScoring", "VolumeLimitScaling")
        }
        for minor in emulation.MINORS
    }
    assert defaults == {
        34: {
            "NodeDeclaredFeatures": None,
            "StorageCapacityScoring": False,
            "VolumeLimitScaling": None,
        },
        35: {
            "NodeDeclaredFeatures": False,
            "StorageCapacityScoring": False,
            "VolumeLimitScaling": False,
        },
        36: {
            "NodeDeclaredFeatures": True,
            "StorageCapacityScoring": False,
            "VolumeLimitScaling": False,
        },
        37: {
            "NodeDeclaredFeatures": True,
            "StorageCapacityScoring": True,
            "VolumeLimitScaling": True,
        },
    }
    assert emulation.emulate(35).gate("NominatedNodeNameForExpectation")
    assert not emulation.emulate(34).gate("NominatedNodeNameForExpectation")


def test_feature_gates_are_read_as_kube_scheduler_reads_them() -> None:
    gates = emulation.parse_feature_gates("StorageCapacityScoring=true, VolumeLimitScaling=False")
    assert gates == {"StorageCapacityScoring": True, "VolumeLimitScaling": False}
    kube = emulation.emulate(36, gates)
    assert kube.gate("StorageCapacityScoring")
    assert not kube.gate("VolumeLimitScaling")
    assert "feature gates StorageCapacityScoring=true" in kube.describe()


@pytest.mark.parametrize(
    ("minor", "text", "message"),
    [
        (37, "Nonsense=true", "unrecognized feature gate: Nonsense (plumb honours"),
        (34, "NodeDeclaredFeatures=true", "kube-scheduler v1.34 has no such gate"),
        (
            37,
            "NodeDeclaredFeatures=false",
            "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true",
        ),
    ],
)
def test_a_gate_kube_scheduler_would_refuse_is_refused(minor: int, text: str, message: str) -> None:
    with pytest.raises(emulation.EmulationError, match=re.escape(message)):
        emulation.emulate(minor, emulation.parse_feature_gates(text))


@pytest.mark.parametrize(
    ("text", "message"),
    [("StorageCapacityScoring", "missing bool value"), ("StorageCapacityScoring=yes", "invalid")],
)
def test_a_malformed_gate_list_is_refused(text: str, message: str) -> None:
    with pytest.raises(emulation.EmulationError, match=re.escape(message)):
        emulation.parse_feature_gates(text)


@pytest.mark.parametrize(("text", "minor"), [("1.36", 36), ("kube=1.34", 34), ("v1.35", 35)])
def test_the_emulated_version_flag_takes_kube_schedulers_forms(text: str, minor: int) -> None:
    assert emulation.parse_emulated_version(text) == minor


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.33", "1.33 is not one plumb decides as; it follows 1.34 to 1.37"),
        ("1.38", "1.38 is not one plumb decides as"),
        ("wardle=1.2", "plumb emulates the kube component only"),
        ("1.36.2", "not a version of the form 1.N"),
    ],
)
def test_an_emulated_version_outside_the_window_is_refused(text: str, message: str) -> None:
    with pytest.raises(emulation.EmulationError, match=re.escape(message)):
        emulation.parse_emulated_version(text)


def test_dra_gates_follow_each_releases_features_file() -> None:
    names = (
        "DRAAdminAccess",
        "DRAPrioritizedList",
        "DRAPartitionableDevices",
        "DRADeviceTaints",
        "DRADeviceBindingConditions",
        "DRAConsumableCapacity",
        "DRAExtendedResource",
        "DRAFractionalCapacityRange",
    )
    rows = {
        minor: tuple(emulation.emulate(minor).gates.get(name) for name in names)
        for minor in emulation.MINORS
    }
    assert rows == {
        34: (True, True, False, False, False, False, False, None),
        35: (True, True, False, False, False, False, False, None),
        36: (True, True, True, True, True, True, True, None),
        # DRAFractionalCapacityRange is on only with --min-compatibility-version=1.37.
        37: (True, True, True, True, True, True, True, False),
    }
    with pytest.raises(emulation.EmulationError, match="locked to true"):
        emulation.emulate(37, {"DRAPrioritizedList": False})


def test_the_allocator_switches_at_its_releases() -> None:
    rows = {
        minor: (
            k.devices.legacy_pools,
            k.devices.distinct_attribute,
            k.devices.distinct_per_request,
            k.devices.tolerations_in_results,
            k.devices.claim_config_once,
            k.devices.strict_capacity,
        )
        for minor in emulation.MINORS
        for k in [emulation.emulate(minor)]
    }
    assert rows == {
        34: (True, True, True, False, False, False),
        35: (False, False, True, True, False, False),
        36: (False, True, True, True, False, False),
        37: (False, True, False, True, True, True),
    }


def test_the_gates_pick_the_allocator_variant_as_kube_scheduler_does() -> None:
    # v1.34 runs the experimental allocator by default (DRAResourceClaimDeviceStatus is on
    # and only it supports that), which knows distinctAttribute; without that gate, the
    # incubating one, which does not.
    assert emulation.emulate(34).devices.distinct_attribute
    off = emulation.emulate(34, {"DRAResourceClaimDeviceStatus": False})
    assert not off.devices.distinct_attribute
    # v1.35 with consumable capacity on runs the experimental one.
    assert emulation.emulate(35, {"DRAConsumableCapacity": True}).devices.distinct_attribute
    # v1.37 with consumable capacity and binding conditions off runs the stable one.
    stable = emulation.emulate(
        37, {"DRAConsumableCapacity": False, "DRADeviceBindingConditions": False}
    )
    assert not stable.devices.distinct_attribute
    assert not stable.devices.binding_conditions


def test_extended_resources_backed_by_dra_follow_their_gate() -> None:
    # DRAExtendedResource: alpha in v1.34 and v1.35, beta and on in v1.36, GA and locked.
    assert [emulation.emulate(m).devices.extended_resources for m in emulation.MINORS] == [
        False,
        False,
        True,
        True,
    ]
    assert emulation.emulate(35, {"DRAExtendedResource": True}).devices.extended_resources
    assert not emulation.emulate(36, {"DRAExtendedResource": False}).devices.extended_resources
    with pytest.raises(emulation.EmulationError, match="locked to true"):
        emulation.emulate(37, {"DRAExtendedResource": False})
