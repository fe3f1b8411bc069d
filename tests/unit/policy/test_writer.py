"""The status writer: many changes in one interval make one PATCH, only what changed is sent, a
deleted policy is dropped and a failed write is tried again next round."""

from __future__ import annotations

import ast
import asyncio
import importlib
import pathlib
from typing import Any

import pytest

from plumb.k8s import client as k8s_client
from plumb.policy import writer as writer_module
from tests.support.fakes import Answer

PATH = "/apis/scheduling.plumb.dev/v1alpha1/namespaces/shop/schedulingpolicies/web/status"


class StatusWriterApi:
    """Scripted answers for requests (201-like success when the script runs out); records
    every request."""

    def __init__(self, *script: Answer) -> None:
        self.script = list(script)
        self.requests: list[tuple[str, str, Any, str]] = []

    async def request(
        self, method: str, path: str, *, body: Any = None, content_type: str = "application/json"
    ) -> k8s_client.ApiResponse:
        self.requests.append((method, path, body, content_type))
        outcome = self.script.pop(0) if self.script else k8s_client.ApiResponse(status=200, body={})
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    @property
    def patches(self) -> list[Any]:
        return [body["status"] for _, _, body, _ in self.requests]


class Statuses:
    """What the reconciler would build: a status per policy, changed by the test."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str], dict[str, Any]] = {}
        self.builds = 0

    def __call__(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.builds += 1
        return self.by_key.get((namespace, name))


class ManualSleep:
    """A fake ``sleep``: the writer's pause lasts until the test opens it."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._open = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await self._open.wait()
        self._open.clear()

    def open(self) -> None:
        self._open.set()


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def _typed(api: k8s_client.ApiClient) -> writer_module.StatusApi:
    return api  # mypy checks that the real client fits what the writer needs


async def test_many_changes_in_one_interval_make_one_write() -> None:
    api, statuses, gate = StatusWriterApi(), Statuses(), ManualSleep()
    writer = writer_module.StatusWriter(api, statuses, interval=1.0, sleep=gate)
    task = asyncio.create_task(writer.run())
    try:
        for pods in range(1, 101):  # a hundred pods placed under the policy at once
            statuses.by_key[("shop", "web")] = {"matchedPods": pods}
            writer.mark_dirty("shop", "web")
        await _settle()
        assert api.requests == [
            ("PATCH", PATH, {"status": {"matchedPods": 100}}, "application/merge-patch+json")
        ]
        assert gate.pauses == [1.0]  # and now it waits out the interval
        for pods in range(101, 151):
            statuses.by_key[("shop", "web")] = {"matchedPods": pods}
            writer.mark_dirty("shop", "web")
        await _settle()
        assert len(api.requests) == 1  # nothing more within the interval
        gate.open()
        await _settle()
        assert api.patches == [{"matchedPods": 100}, {"matchedPods": 150}]
        assert statuses.builds == 2
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_only_what_changed_is_sent_and_what_went_away_is_deleted() -> None:
    api, statuses = StatusWriterApi(), Statuses()
    writer = writer_module.StatusWriter(api, statuses)
    statuses.by_key[("shop", "web")] = {
        "matchedPods": 3,
        "domains": {"zone": {"a": 2, "b": 1}},
        "budget": {"used": 0, "remaining": 3},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    writer.mark_dirty("shop", "web")
    assert await writer.flush() == 1
    statuses.by_key[("shop", "web")] = {
        "matchedPods": 3,
        "domains": {"zone": {"a": 2, "c": 1}},
        "conditions": [{"type": "Ready", "status": "False"}],
    }
    writer.mark_dirty("shop", "web")
    assert await writer.flush() == 1
    assert api.patches[1] == {
        "budget": None,
        "domains": {"zone": {"b": None, "c": 1}},
        "conditions": [{"type": "Ready", "status": "False"}],
    }
    writer.mark_dirty("shop", "web")
    assert await writer.flush() == 0  # nothing changed: no request at all
    assert len(api.requests) == 2


async def test_a_seeded_status_is_cleaned_on_the_first_write_after_a_restart() -> None:
    api, statuses = StatusWriterApi(), Statuses()
    writer = writer_module.StatusWriter(api, statuses)
    writer.seed("shop", "web", {"matchedPods": 2, "budget": {"used": 1}})
    statuses.by_key[("shop", "web")] = {"matchedPods": 2}
    writer.mark_dirty("shop", "web")
    await writer.flush()
    assert api.patches == [{"budget": None}]


async def test_a_policy_that_is_gone_is_dropped() -> None:
    gone = k8s_client.ApiResponse(status=404, body={"message": "not found"})
    api, statuses = StatusWriterApi(gone), Statuses()
    writer = writer_module.StatusWriter(api, statuses)
    statuses.by_key[("shop", "web")] = {"matchedPods": 1}
    writer.mark_dirty("shop", "web")
    assert await writer.flush() == 0
    assert writer.dirty == frozenset()
    assert await writer.flush() == 0
    assert len(api.requests) == 1


@pytest.mark.parametrize(
    "failure",
    [
        k8s_client.ApiResponse(status=500, body={"message": "etcd timeout"}),
        k8s_client.ApiResponse(status=429, body={}, retry_after=1.0),
        k8s_client.ApiResponse(status=422, body={"message": "invalid"}),
        k8s_client.TransportError("PATCH: connection refused"),
    ],
)
async def test_a_failed_write_is_tried_again_next_round(failure: Answer) -> None:
    api, statuses = StatusWriterApi(failure), Statuses()
    writer = writer_module.StatusWriter(api, statuses)
    statuses.by_key[("shop", "web")] = {"matchedPods": 1}
    writer.mark_dirty("shop", "web")
    assert await writer.flush() == 0
    assert writer.dirty == {("shop", "web")}
    assert await writer.flush() == 1
    assert api.patches == [{"matchedPods": 1}, {"matchedPods": 1}]


async def test_a_policy_the_source_no_longer_knows_is_not_written() -> None:
    api, statuses = StatusWriterApi(), Statuses()
    writer = writer_module.StatusWriter(api, statuses)
    writer.mark_dirty("shop", "deleted")
    assert await writer.flush() == 0
    assert api.requests == []


async def test_a_failing_source_does_not_stop_the_other_policies() -> None:
    api = StatusWriterApi()

    def source(namespace: str, name: str) -> dict[str, Any] | None:
        if name == "broken":
            raise KeyError(name)
        return {"matchedPods": 1}

    writer = writer_module.StatusWriter(api, source)
    writer.mark_dirty("shop", "broken")
    writer.mark_dirty("shop", "web")
    assert await writer.flush() == 1
    assert [path for _, path, _, _ in api.requests] == [PATH]


async def test_each_dirty_policy_gets_its_own_path() -> None:
    api = StatusWriterApi()
    writer = writer_module.StatusWriter(api, lambda ns, name: {"matchedPods": 0})
    writer.mark_dirty("b", "two")
    writer.mark_dirty("a", "one")
    writer.mark_dirty("a", "one")
    assert await writer.flush() == 2
    assert [path for _, path, _, _ in api.requests] == [
        "/apis/scheduling.plumb.dev/v1alpha1/namespaces/a/schedulingpolicies/one/status",
        "/apis/scheduling.plumb.dev/v1alpha1/namespaces/b/schedulingpolicies/two/status",
    ]


def test_only_the_writer_talks_to_the_api_server() -> None:
    package = pathlib.Path(writer_module.__file__).parent
    for path in sorted(package.glob("*.py")):
        module = importlib.import_module(f"plumb.policy.{path.stem}")
        for name in getattr(module, "__all__", ()):
            assert hasattr(module, name), f"{path.name}: __all__ names missing {name}"
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        talking = {m for m in imported if m.split(".")[0] in ("aiohttp", "kopf", "kubernetes")}
        talking |= {m for m in imported if m.startswith("plumb.k8s")}
        if path.stem == "writer":
            assert talking == {"plumb.k8s", "plumb.k8s.client"}
        else:
            assert talking == set(), f"{path.name} imports {sorted(talking)}"


async def test_a_policy_created_again_under_its_name_gets_its_whole_status() -> None:
    # Deleted and created again between two rounds: the new object has an empty status, so a
    # patch of what changed since the old one's would leave it partial.
    api, statuses = StatusWriterApi(), Statuses()
    owners = {("shop", "web"): "uid-old"}
    writer = writer_module.StatusWriter(
        api, statuses, owner=lambda namespace, name: owners[(namespace, name)]
    )
    whole = {"matchedPods": 3, "conditions": [{"type": "Ready", "status": "True"}]}
    statuses.by_key[("shop", "web")] = whole
    writer.mark_dirty("shop", "web")
    assert await writer.flush() == 1
    owners[("shop", "web")] = "uid-new"
    statuses.by_key[("shop", "web")] = {**whole, "matchedPods": 4}
    writer.mark_dirty("shop", "web")
    assert await writer.flush() == 1
    assert api.patches[1] == {**whole, "matchedPods": 4}  # whole, not just matchedPods
    writer.mark_dirty("shop", "web")
    statuses.by_key[("shop", "web")] = {**whole, "matchedPods": 5}
    assert await writer.flush() == 1
    assert api.patches[2] == {"matchedPods": 5}  # the same object again: only the change
