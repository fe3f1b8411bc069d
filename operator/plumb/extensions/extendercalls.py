"""What a scheduling attempt asks its HTTP extenders, verb by verb, and what kube-scheduler makes
of their answers: the filters one after another over the nodes the plugins left
(findNodesThatPassExtenders), the prioritizers together (prioritizeNodes), the one binder
(extendersBinding), the preempters one after another over the candidates (callExtenders).

``ExtenderCalls`` keeps one client per configured extender (extenderclient.py, its connections
reused) and asks only the extenders interested in the pod (extenders.interested), in the order
given (extenders.ordered). An ignorable extender's error skips it; another's is returned as
kube-scheduler's error text, for the caller to end the attempt with (filter, bind) or to word
as preemption's status (preempt); a prioritizer's error is always ignored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from plumb.extensions import extenderclient, extenders

logger = logging.getLogger("plumb.extenders")

Body = Mapping[str, Any]
BodyOf = Callable[[str], Body | None]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Filtered:
    """What the filters kept of the nodes they were given (``nodes``, in order), and the
    status each one set, a later extender's overwriting an earlier one's: node to (reason,
    unresolvable). A node dropped without a status has none (kube-scheduler's absent status:
    UnschedulableAndUnresolvable, no words). ``fresh``: the kept nodes that are an extender's
    own copies (its answer's ``Nodes``), which kube-scheduler scores as new, empty nodes.
    ``error``: a non-ignorable extender's error text (the attempt ends with it)."""

    nodes: tuple[str, ...]
    statuses: Mapping[str, tuple[str, bool]] = dataclasses.field(default_factory=dict)
    fresh: frozenset[str] = frozenset()
    bodies: Mapping[str, Body] = dataclasses.field(default_factory=dict)
    error: str | None = None
    asked: int = 0  # filter calls made

    def changed(self, given: Sequence[str]) -> bool:
        """Whether the extenders dropped any of the ``given`` nodes (kube-scheduler then adds
        "Extender" to the pod's unschedulable plugins)."""
        return len(self.nodes) != len(given)


@dataclasses.dataclass(frozen=True, kw_only=True)
class VictimsOn:
    """One node's victims as preemption chose them (or an extender replaced them), most
    important first, and the PodDisruptionBudgets evicting them violates."""

    uids: tuple[str, ...]
    pdb_violations: int = 0


class ExtenderCalls:
    """The extenders' clients, and the calls of each verb."""

    def __init__(self) -> None:
        self._clients: dict[extenders.Extender, extenderclient.ExtenderClient] = {}
        self._configured: tuple[extenders.Extender, ...] = ()

    async def _using(self, configured: Sequence[extenders.Extender]) -> None:
        """The configuration in force: a reload's changes close the clients of the
        extenders it removed or changed."""
        if tuple(configured) != self._configured:
            self._configured = tuple(configured)
            await self.retire(configured)

    def client(self, extender: extenders.Extender) -> extenderclient.ExtenderClient:
        found = self._clients.get(extender)
        if found is None:
            found = self._clients[extender] = extenderclient.ExtenderClient(extender)
        return found

    async def retire(self, keep: Iterable[extenders.Extender]) -> None:
        """Close the clients of extenders no longer configured (a reload)."""
        kept = set(keep)
        for extender in [e for e in self._clients if e not in kept]:
            await self._clients.pop(extender).close()

    async def close(self) -> None:
        await self.retire(())

    # Filter ---------------------------------------------------------------------------------

    async def filter(
        self,
        configured: Sequence[extenders.Extender],
        pod: Body | None,
        nodes: Sequence[str],
        node_body: BodyOf,
    ) -> Filtered:
        """findNodesThatPassExtenders over ``nodes`` (the framework-feasible ones): each
        interested extender with a filter verb in turn, given what the one before kept."""
        await self._using(configured)
        kept = tuple(nodes)
        statuses: dict[str, tuple[str, bool]] = {}
        fresh: frozenset[str] = frozenset()
        copies: dict[str, Body] = {}
        asked = 0
        for extender in configured:
            if not kept:
                break
            if not extender.filter_verb or not _interested(extender, pod):
                continue
            asked += 1
            try:
                sent = _sent(extender, kept, functools.partial(_body_of, copies, node_body))
                answer = await self.client(extender).filter(_pod(extender, pod), sent)
            except extenderclient.ExtenderError as error:
                if extender.ignorable:
                    logger.info(
                        "Skipping extender %s as it returned error and has ignorable flag set: %s",
                        extender.name,
                        error,
                    )
                    continue
                return Filtered(nodes=(), statuses=statuses, error=str(error), asked=asked)
            for name, reason in answer.failed_and_unresolvable.items():
                statuses[name] = (reason, True)
            for name, reason in answer.failed.items():
                if name not in answer.failed_and_unresolvable:
                    statuses[name] = (reason, False)
            if answer.returned is not None:
                # Fresh NodeInfos around the extender's copies, whatever it was sent.
                copies = dict(zip(answer.nodes, answer.returned, strict=True))
                fresh = frozenset(answer.nodes)
            else:
                # Names mapped back to the nodes the extender was given.
                copies = {name: copies[name] for name in answer.nodes if name in copies}
                fresh = fresh.intersection(answer.nodes)
            kept = answer.nodes
        return Filtered(nodes=kept, statuses=statuses, fresh=fresh, bodies=copies, asked=asked)

    # Prioritize -----------------------------------------------------------------------------

    async def prioritize(
        self,
        configured: Sequence[extenders.Extender],
        pod: Body | None,
        filtered: Filtered,
        node_body: BodyOf,
    ) -> dict[str, int]:
        """prioritizeNodes' extender part: every interested prioritizer at once over the
        nodes the filters kept; per node the sum of score * weight * 10 over the answers
        (a host named twice counts twice, a host not among the nodes is ignored, an error
        gives no score)."""
        await self._using(configured)
        asking = [e for e in configured if e.prioritize_verb and e.weight and _interested(e, pod)]
        if not asking:
            return {}
        nodes = filtered.nodes

        async def ask(extender: extenders.Extender) -> tuple[tuple[str, int], ...]:
            try:
                sent = _sent(
                    extender, nodes, functools.partial(_body_of, filtered.bodies, node_body)
                )
                return await self.client(extender).prioritize(_pod(extender, pod), sent)
            except extenderclient.ExtenderError as error:
                logger.debug(
                    "Failed to run extender's priority function %s, no score given: %s",
                    extender.name,
                    error,
                )
                return ()

        answers = await asyncio.gather(*(ask(e) for e in asking))
        totals = dict.fromkeys(nodes, 0)
        for extender, answer in zip(asking, answers, strict=True):
            for host, score in answer:
                if host in totals:
                    totals[host] += extenders.weighted(score, extender)
        return totals

    # Bind -----------------------------------------------------------------------------------

    async def bind(
        self,
        configured: Sequence[extenders.Extender],
        pod: Body | None,
        namespace: str,
        name: str,
        uid: str,
        node: str,
    ) -> str | None:
        """extendersBinding: the first interested binder binds the pod (""), or fails with its
        error text; None when none did (no binder, or an ignorable one failed): the bind
        plugins (DefaultBinder) bind it."""
        await self._using(configured)
        for extender in configured:
            if not extender.bind_verb or not _interested(extender, pod):
                continue
            try:
                await self.client(extender).bind(namespace, name, uid, node)
            except extenderclient.ExtenderError as error:
                if extender.ignorable:
                    logger.info(
                        "Skipping extender %s in bind as it returned error and has ignorable "
                        "flag set: %s",
                        extender.name,
                        error,
                    )
                    continue
                return str(error)
            return ""
        return None

    # Preempt --------------------------------------------------------------------------------

    async def preempt(
        self,
        configured: Sequence[extenders.Extender],
        pod: Body | None,
        victims: Mapping[str, VictimsOn],
        pods_on: Mapping[str, Sequence[str]],
        pod_body: BodyOf,
    ) -> dict[str, VictimsOn] | str:
        """callExtenders: each interested extender with a preempt verb in turn, given the
        candidates' victims as the one before left them; its answer replaces them (the nodes
        it leaves out are dropped). ``pods_on``: the uids of each node's pods in the snapshot
        (an answer's UIDs are looked up there). Returns the victims left, or the error text of
        an extender that is not ignorable."""
        await self._using(configured)
        current = dict(victims)
        if not current:
            return current
        for extender in configured:
            if not extender.preempt_verb or not _interested(extender, pod):
                continue
            try:
                answer = await self._preempt_one(extender, pod, current, pods_on, pod_body)
            except extenderclient.ExtenderError as error:
                if extender.ignorable:
                    logger.info(
                        "Skipped extender %s as it returned error and has ignorable flag set: %s",
                        extender.name,
                        error,
                    )
                    continue
                return str(error)
            for node in [n for n, v in answer.items() if not v.uids]:
                if not extender.ignorable:
                    return extenders.no_victims(node)
                del answer[node]
            current = answer
            if not current:
                break
        return current

    async def _preempt_one(
        self,
        extender: extenders.Extender,
        pod: Body | None,
        current: Mapping[str, VictimsOn],
        pods_on: Mapping[str, Sequence[str]],
        pod_body: BodyOf,
    ) -> dict[str, VictimsOn]:
        """ProcessPreemption: the request, and the answer's UIDs looked up on their nodes."""
        sent = {}
        for node, on in current.items():
            if extender.node_cache_capable:
                bodies: tuple[Body, ...] = tuple({"metadata": {"uid": uid}} for uid in on.uids)
            else:
                bodies = tuple(
                    _needed(pod_body(uid), f"pod with uid {uid}", extender) for uid in on.uids
                )
            sent[node] = extenderclient.Victims(pods=bodies, pdb_violations=on.pdb_violations)
        answer = await self.client(extender).preempt(_pod(extender, pod), sent)
        out: dict[str, VictimsOn] = {}
        for node, (uids, violations) in answer.items():
            there = pods_on.get(node)
            if there is None:
                raise extenderclient.ExtenderError(extenders.unknown_victim_node(node))
            for uid in uids:
                if uid not in there:
                    words = extenders.unknown_victim(extender, uid, node)
                    raise extenderclient.ExtenderError(words)
            out[node] = VictimsOn(uids=uids, pdb_violations=violations)
        return out


def _interested(extender: extenders.Extender, pod: Body | None) -> bool:
    """IsInterested; a pod whose body plumb does not hold interests every extender that
    manages resources too (the call then says why it cannot be made)."""
    return pod is None or extenders.interested(extender, pod)


def _pod(extender: extenders.Extender, pod: Body | None) -> Body:
    return _needed(pod, "the pod", extender)


def _sent(
    extender: extenders.Extender, nodes: Sequence[str], node_body: BodyOf
) -> Sequence[Body | str]:
    """What an extender is sent of the nodes: names to a nodeCacheCapable one, else bodies."""
    if extender.node_cache_capable:
        return list(nodes)
    return [_needed(node_body(name), f"node {name}", extender) for name in nodes]


def _body_of(copies: Mapping[str, Body], node_body: BodyOf, name: str) -> Body | None:
    """A node as an extender is sent it: an earlier extender's copy, else the watch's."""
    return copies.get(name) or node_body(name)


def _needed(body: Body | None, what: str, extender: extenders.Extender) -> Body:
    if body is None:
        raise extenderclient.ExtenderError(
            f"plumb holds no copy of {what} to send extender {extender.name} (it keeps objects "
            "from the first event it sees while extenders are configured)"
        )
    return body
