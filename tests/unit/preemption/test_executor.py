"""The recorder's preemption writes, as kube-scheduler's PreemptPod makes them: the victim's
DisruptionTarget condition, then its uid-guarded deletion, then its Preempted event; the
preemptor's nominated node; and nothing at all from a replica that may not act."""

from __future__ import annotations

from typing import Any

import pytest

from plumb import events
from plumb.backend.records import objects
from plumb.k8s import client as k8s_client
from plumb.preemption import execution
from plumb_dev.testing.builders import make_pod

Call = tuple[str, str, str, dict[str, Any]]


def _answer(status: int, message: str = "", **extra: Any) -> k8s_client.ApiResponse:
    body: dict[str, Any] = {"kind": "Status", "message": message, **extra} if message else {}
    return k8s_client.ApiResponse(status=status, body=body)


class RecordingPodsApi:
    """Every write recorded in order: ("patch" | "delete" | "event", namespace, name, body);
    each kind answered from its script in order, then with success."""

    def __init__(
        self,
        *,
        patches: tuple[k8s_client.ApiResponse | Exception, ...] = (),
        deletes: tuple[k8s_client.ApiResponse | Exception, ...] = (),
    ) -> None:
        self.calls: list[Call] = []
        self._patches = list(patches)
        self._deletes = list(deletes)

    @staticmethod
    def _next(
        script: list[k8s_client.ApiResponse | Exception], default: int
    ) -> k8s_client.ApiResponse:
        outcome = script.pop(0) if script else _answer(default)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def create_event(
        self, *, namespace: str, event: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        self.calls.append(("event", namespace, event["regarding"]["name"], event))
        return _answer(201)

    async def patch_pod_status(
        self, *, namespace: str, name: str, patch: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        self.calls.append(("patch", namespace, name, patch))
        return self._next(self._patches, 200)

    async def delete_pod(self, *, namespace: str, name: str, uid: str) -> k8s_client.ApiResponse:
        self.calls.append(("delete", namespace, name, {"uid": uid}))
        return self._next(self._deletes, 200)

    def kinds(self) -> list[str]:
        return [call[0] for call in self.calls]


class ScriptedGate:
    """A leadership gate answering from ``answers`` in order, then letting everything through."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)

    def __call__(self) -> bool:
        return self.answers.pop(0) if self.answers else True


VICTIM = objects.parse_pod(
    make_pod("victim", "ns").scheduler("plumb").uid("uid-victim").node("n1").obj()
)
PREEMPTOR = objects.parse_pod(
    make_pod("preemptor", "ns").scheduler("plumb").uid("uid-preemptor").obj()
)


async def test_preempt_writes_condition_then_deletion_then_event() -> None:
    api = RecordingPodsApi()
    recorder = events.Recorder(api, instance="plumb-0")
    assert await execution.Executor(recorder).preempt(VICTIM, PREEMPTOR, "n1")
    await recorder.drain()
    assert api.kinds() == ["patch", "delete", "event"]

    _, namespace, name, patch = api.calls[0]
    assert (namespace, name) == ("ns", "victim")
    assert patch["metadata"] == {"uid": "uid-victim"}
    [condition] = patch["status"]["conditions"]
    assert condition["type"] == "DisruptionTarget"
    assert condition["status"] == "True"
    assert condition["reason"] == "PreemptionByScheduler"
    assert condition["message"] == "plumb: preempting to accommodate a higher priority pod"
    assert condition["lastTransitionTime"].endswith("Z")
    assert set(patch["status"]) == {"conditions"}

    assert api.calls[1][1:] == ("ns", "victim", {"uid": "uid-victim"})

    event = api.calls[2][3]
    assert event["type"] == "Normal"
    assert event["reason"] == "Preempted"
    assert event["action"] == "Preempting"
    assert event["note"] == "Preempted by pod uid-preemptor on node n1"
    assert event["reportingController"] == "plumb"
    assert event["reportingInstance"] == "plumb-0"
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "ns",
        "name": "victim",
        "uid": "uid-victim",
    }
    assert event["related"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "ns",
        "name": "preemptor",
        "uid": "uid-preemptor",
    }


async def test_the_condition_names_the_preemptors_scheduler() -> None:
    api = RecordingPodsApi()
    recorder = events.Recorder(api, instance="plumb-0")
    other = objects.parse_pod(
        make_pod("preemptor", "ns").scheduler("tight").uid("uid-preemptor").obj()
    )
    assert await execution.Executor(recorder).preempt(VICTIM, other, "n1")
    condition = api.calls[0][3]["status"]["conditions"][0]
    assert condition["message"] == "tight: preempting to accommodate a higher priority pod"


async def test_other_events_have_no_related_object() -> None:
    api = RecordingPodsApi()
    recorder = events.Recorder(api, instance="plumb-0")
    recorder.scheduled(PREEMPTOR, "n1")
    await recorder.drain()
    assert "related" not in api.calls[0][3]


@pytest.mark.parametrize(
    "gone",
    [
        _answer(404, 'pods "victim" not found', reason="NotFound"),
        # The two wordings of a failed uid precondition: the registry's, the storage's.
        _answer(
            409,
            'Operation cannot be fulfilled on Pod "victim": the UID in the precondition '
            "(uid-victim) does not match the UID in record (uid-other). The object might have "
            "been deleted and then recreated",
            reason="Conflict",
        ),
        _answer(
            409,
            'Operation cannot be fulfilled on Pod "victim": Precondition failed: UID in '
            "precondition: uid-victim, UID in object meta: uid-other",
            reason="Conflict",
        ),
    ],
)
async def test_a_victim_gone_at_its_deletion_is_preempted_without_an_event(
    gone: k8s_client.ApiResponse, caplog: pytest.LogCaptureFixture
) -> None:
    api = RecordingPodsApi(deletes=(gone,))
    recorder = events.Recorder(api, instance="plumb-0")
    assert await execution.Executor(recorder).preempt(VICTIM, PREEMPTOR, "n1")
    await recorder.drain()
    assert api.kinds() == ["patch", "delete"]
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


@pytest.mark.parametrize(
    "gone",
    [
        _answer(404, 'pods "victim" not found', reason="NotFound"),
        _answer(
            422,
            'Pod "victim" is invalid: metadata.uid: Invalid value: "uid-victim": field is '
            "immutable",
            reason="Invalid",
            details={"causes": [{"reason": "FieldValueInvalid", "field": "metadata.uid"}]},
        ),
    ],
)
async def test_a_victim_gone_at_its_condition_is_neither_deleted_nor_reported(
    gone: k8s_client.ApiResponse,
) -> None:
    api = RecordingPodsApi(patches=(gone,))
    recorder = events.Recorder(api, instance="plumb-0")
    assert await execution.Executor(recorder).preempt(VICTIM, PREEMPTOR, "n1")
    await recorder.drain()
    assert api.kinds() == ["patch"]


async def test_a_refused_condition_stops_the_preemption(caplog: pytest.LogCaptureFixture) -> None:
    # kube-scheduler deletes no victim whose DisruptionTarget condition it could not write.
    for refusal in (
        _answer(500, "etcd is sad"),
        _answer(409, "the object has been modified", reason="Conflict"),
        k8s_client.TransportError("PATCH: connection refused"),
    ):
        api = RecordingPodsApi(patches=(refusal,))
        recorder = events.Recorder(api, instance="plumb-0")
        assert not await execution.Executor(recorder).preempt(VICTIM, PREEMPTOR, "n1")
        await recorder.drain()
        assert api.kinds() == ["patch"]
    assert any("DisruptionTarget condition" in r.getMessage() for r in caplog.records)


async def test_a_refused_deletion_fails_the_preemption_without_an_event() -> None:
    api = RecordingPodsApi(deletes=(_answer(403, "forbidden", reason="Forbidden"),))
    recorder = events.Recorder(api, instance="plumb-0")
    assert not await execution.Executor(recorder).preempt(VICTIM, PREEMPTOR, "n1")
    await recorder.drain()
    assert api.kinds() == ["patch", "delete"]


@pytest.mark.parametrize("open_for", [0, 1, 2])
async def test_nothing_is_written_once_the_gate_shuts(open_for: int) -> None:
    # The gate is asked before each of the three writes; shut at the n-th, the rest are not sent.
    api = RecordingPodsApi()
    gate = ScriptedGate(*([True] * open_for), *([False] * 5))
    recorder = events.Recorder(api, instance="plumb-0", gate=gate)
    done = await execution.Executor(recorder).preempt(VICTIM, PREEMPTOR, "n1")
    await recorder.drain()
    assert api.kinds() == ["patch", "delete"][:open_for]
    # Once deleted, the victim is preempted even if the event could not be posted.
    assert done is (open_for == 2)


async def test_nominate_patches_only_the_nominated_node_and_awaits_it() -> None:
    api = RecordingPodsApi()
    recorder = events.Recorder(api, instance="plumb-0")
    assert await execution.Executor(recorder).nominate(PREEMPTOR, "n1")
    assert api.calls == [
        (
            "patch",
            "ns",
            "preemptor",
            {"metadata": {"uid": "uid-preemptor"}, "status": {"nominatedNodeName": "n1"}},
        )
    ]


async def test_nominate_is_false_when_refused_gone_or_not_allowed() -> None:
    for refusal in (
        _answer(500, "etcd is sad"),
        _answer(404, 'pods "preemptor" not found', reason="NotFound"),
        k8s_client.TransportError("PATCH: connection refused"),
    ):
        api = RecordingPodsApi(patches=(refusal,))
        assert not await execution.Executor(events.Recorder(api, instance="plumb-0")).nominate(
            PREEMPTOR, "n1"
        )
        assert api.kinds() == ["patch"]
    api = RecordingPodsApi()
    shut = events.Recorder(api, instance="plumb-0", gate=lambda: False)
    assert not await execution.Executor(shut).nominate(PREEMPTOR, "n1")
    assert api.calls == []


async def test_clear_nomination_sets_null_in_the_background_and_only_when_allowed() -> None:
    api = RecordingPodsApi()
    recorder = events.Recorder(api, instance="plumb-0")
    execution.Executor(recorder).clear_nomination(PREEMPTOR)
    await recorder.drain()
    assert api.calls == [
        (
            "patch",
            "ns",
            "preemptor",
            {"metadata": {"uid": "uid-preemptor"}, "status": {"nominatedNodeName": None}},
        )
    ]
    api = RecordingPodsApi()
    shut = events.Recorder(api, instance="plumb-0", gate=lambda: False)
    execution.Executor(shut).clear_nomination(PREEMPTOR)
    await shut.drain()
    assert api.calls == []


async def test_an_api_that_cannot_delete_pods_fails_the_preemption() -> None:
    class EventsOnly:
        def __init__(self) -> None:
            self.patches = 0

        async def create_event(
            self, *, namespace: str, event: dict[str, Any]
        ) -> k8s_client.ApiResponse:
            raise AssertionError("no event for a victim not deleted")

        async def patch_pod_status(
            self, *, namespace: str, name: str, patch: dict[str, Any]
        ) -> k8s_client.ApiResponse:
            self.patches += 1
            return _answer(200)

    api = EventsOnly()
    recorder = events.Recorder(api, instance="plumb-0")
    assert not await execution.Executor(recorder).preempt(VICTIM, PREEMPTOR, "n1")
    await recorder.drain()
    assert api.patches == 0
