"""The HTTP extenders of a KubeSchedulerConfiguration as kube-scheduler builds them
(NewHTTPExtender, buildExtenders): one record per extender, which pods it is interested in, the
order the scheduling cycle calls them in, and their TLS settings checked in its words.

Pure: no I/O here (extenderclient.py talks to them, reading any TLS files when it is built).
kube-scheduler v1.34 to v1.37 treat extenders alike (docs: /work/notes/extenders-upstream.md).
"""

from __future__ import annotations

import base64
import dataclasses
import re
import ssl
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DEFAULT_TIMEOUT = 5.0
"""Seconds: NewHTTPExtender's DefaultExtenderTimeout, for an httpTimeout of 0 (or none)."""
MAX_PRIORITY = 10
"""extender/v1 MaxExtenderPriority: a prioritize score of 10 weighs as a plugin's 100."""
MAX_NODE_SCORE = 100

PLUGIN = "Extender"
"""kube-scheduler's ExtenderName: what a pod's unschedulable plugins name when extenders dropped
some of its nodes (it then waits for any cluster event), and the plugin their filter reasons
are counted under in plumb's trace."""

INSECURE_WITH_CA = "specifying a root certificates file with the insecure flag is not allowed"
_PEM_BLOCK = re.compile(rb"-----BEGIN ([^\n-]*)-----\r?\n(.*?)-----END \1-----", re.DOTALL)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ManagedResource:
    """An extended resource the extender manages; ``ignored_by_scheduler``: NodeResourcesFit
    does not check it (it becomes every profile's NodeResourcesFitArgs.ignoredResources)."""

    name: str
    ignored_by_scheduler: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Tls:
    """tlsConfig as written: the ``*_data`` fields are the decoded bytes of the base64 text."""

    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Extender:
    """One configured extender (v1 Extender). A verb "" is not called: no filter keeps every
    node, no prioritize scores nothing, no bind leaves binding to the bind plugins, no preempt
    keeps the scheduler's victims. ``http_timeout``: seconds for a whole exchange, None for no
    limit (a negative httpTimeout); ``enable_https`` does not change the URL's scheme, only the
    TLS settings (``insecure`` when no CA is given)."""

    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    preempt_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    enable_https: bool = False
    tls: Tls | None = None
    http_timeout: float | None = DEFAULT_TIMEOUT
    node_cache_capable: bool = False
    managed_resources: tuple[ManagedResource, ...] = ()
    ignorable: bool = False

    @property
    def name(self) -> str:
        """What kube-scheduler calls it (HTTPExtender.Name): its urlPrefix."""
        return self.url_prefix

    def url(self, verb: str) -> str:
        """Where a verb is POSTed: the prefix without trailing "/", "/", the verb as written."""
        return self.url_prefix.rstrip("/") + "/" + verb

    @property
    def managed(self) -> frozenset[str]:
        return frozenset(resource.name for resource in self.managed_resources)


@dataclasses.dataclass(frozen=True, slots=True)
class Kept:
    """Which objects' whole bodies the extenders need, so the scheduler keeps them as the
    watches deliver them: the pending pods (every verb but bind sends the pod, and interest
    reads its containers), the nodes (a filter or prioritize verb of an extender that is not
    nodeCacheCapable), the bound pods (victims, to the preempt verb of such an extender)."""

    pending: bool = False
    nodes: bool = False
    bound: bool = False


def kept(extenders: Iterable[Extender]) -> Kept:
    listed = tuple(extenders)
    whole = [e for e in listed if not e.node_cache_capable]
    return Kept(
        pending=bool(listed),
        nodes=any(e.filter_verb or e.prioritize_verb for e in whole),
        bound=any(e.preempt_verb for e in whole),
    )


def ordered(extenders: Iterable[Extender]) -> tuple[Extender, ...]:
    """buildExtenders' order, in which filter, bind and preempt call them: the extenders that
    are not ignorable first, then the ignorable ones, each in file order."""
    listed = tuple(extenders)
    return (
        *(e for e in listed if not e.ignorable),
        *(e for e in listed if e.ignorable),
    )


def ignored_by_scheduler(extenders: Iterable[Extender]) -> tuple[str, ...]:
    """The managed resources NodeResourcesFit skips, in file order (buildExtenders)."""
    return tuple(r.name for e in extenders for r in e.managed_resources if r.ignored_by_scheduler)


def interested(extender: Extender, pod: Mapping[str, Any]) -> bool:
    """IsInterested: every pod when it manages nothing, else a pod one of whose containers or
    init containers (sidecars among them) names a managed resource among its requests or
    limits, whatever the quantity. Pod-level resources and ephemeral containers do not count."""
    managed = extender.managed
    if not managed:
        return True
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            resources = (container or {}).get("resources") or {}
            for part in ("requests", "limits"):
                if managed.intersection(resources.get(part) or {}):
                    return True
    return False


def transport(extender: Extender) -> Tls | None:
    """The TLS settings makeTransport hands client-go: the extender's, made insecure when
    enableHTTPS is set without a CA; None when none of CA, client certificate, insecure or
    server name is set (a plain transport: an https URL then verifies with the system's
    roots)."""
    tls = extender.tls or Tls()
    if extender.enable_https and not (tls.ca_file or tls.ca_data):
        tls = dataclasses.replace(tls, insecure=True)
    has_cert = bool(tls.cert_data or tls.cert_file) and bool(tls.key_data or tls.key_file)
    if not (tls.ca_file or tls.ca_data or has_cert or tls.insecure or tls.server_name):
        return None
    return tls


def tls_problem(extender: Extender) -> str | None:
    """What client-go's TLSConfigFor refuses in the TLS settings, checked without reading
    files (extenderclient reads them when it is built): a CA with insecure, CA data that holds
    no certificate, certificate or key data without PEM. kube-scheduler prefixes these with
    "couldn't build extenders: "."""
    tls = transport(extender)
    if tls is None:
        return None
    if (tls.ca_file or tls.ca_data) and tls.insecure:
        return INSECURE_WITH_CA
    if tls.ca_data:
        problem = ca_problem(tls.ca_data)
        if problem is not None:
            return f"unable to load root certificates: {problem}"
    has_cert = bool(tls.cert_data or tls.cert_file) and bool(tls.key_data or tls.key_file)
    files_only = bool(tls.cert_file and tls.key_file) and not (tls.cert_data or tls.key_data)
    if has_cert and not files_only:
        if tls.cert_data and not _blocks(tls.cert_data, lambda kind: kind == b"CERTIFICATE"):
            return "tls: failed to find any PEM data in certificate input"
        if tls.key_data and not _blocks(
            tls.key_data, lambda kind: kind == b"PRIVATE KEY" or kind.endswith(b" PRIVATE KEY")
        ):
            return "tls: failed to find any PEM data in key input"
    return None


def ca_problem(data: bytes) -> str | None:
    """rootCertPool's refusal of CA data in which no certificate parses (createErrorParsingCAData's
    words), None when one does (AppendCertsFromPEM skips the others)."""
    blocks = list(_PEM_BLOCK.finditer(data))
    if any(b.group(1) == b"CERTIFICATE" and _parses(b.group(0)) for b in blocks):
        return None
    end = 0
    for block in blocks:
        if block.group(1) == b"CERTIFICATE":
            return "failed to parse certificate: x509: malformed certificate"
        end = block.end()
        end += 2 if data[end : end + 2] == b"\r\n" else 1 if data[end : end + 1] == b"\n" else 0
    if end < len(data):
        return "unable to parse bytes as PEM block"
    return "no valid certificate authority data seen"


def _parses(pem: bytes) -> bool:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cadata=pem.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError):
        return False
    return True


def _blocks(data: bytes, wanted: Any) -> list[bytes]:
    found: list[bytes] = []
    for block in _PEM_BLOCK.finditer(data):
        try:
            base64.b64decode(b"".join(block.group(2).split()), validate=True)
        except ValueError:
            continue
        if wanted(block.group(1)):
            found.append(block.group(0))
    return found


# Words of the scheduling cycle about an extender's answers (extender.go, preemption.go) -----


def unknown_filtered_node(extender: Extender, node: str) -> str:
    """A nodeCacheCapable extender's filter answered a node it was not sent."""
    return (
        f'extender "{extender.name}" claims a filtered node "{node}" which is not found in the '
        "input node list"
    )


def unknown_victim_node(node: str) -> str:
    """A preempt answer named a node the scheduler's snapshot does not have."""
    return f'nodeinfo not found for node name "{node}"'


def unknown_victim(extender: Extender, uid: str, node: str) -> str:
    """A preempt answer named a pod (by UID) that is not on that node (Go prints the
    *MetaPod with %v: ``&{uid}``)."""
    return (
        f"extender: {extender.name} claims to preempt pod (UID: &{{{uid}}}) on node: {node}, "
        "but the pod is not found on that node"
    )


def no_victims(node: str) -> str:
    """A preempt answer (not ignorable) kept a node without victims."""
    return f'expected at least one victim pod on node "{node}"'


def weighted(score: int, extender: Extender) -> int:
    """An extender's score as prioritizeNodes adds it to a node's total: score * weight * 10,
    unclamped (a score beyond 0..10, negative or not, counts as given)."""
    return score * extender.weight * (MAX_NODE_SCORE // MAX_PRIORITY)


def names_of(nodes: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The names of node bodies, in their order."""
    return tuple(str((node.get("metadata") or {}).get("name") or "") for node in nodes)
