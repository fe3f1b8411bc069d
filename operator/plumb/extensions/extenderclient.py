"""The HTTP client of one extender, one method per verb, asking what kube-scheduler's
HTTPExtender asks and reading the answers as it reads them (extender.go).

Requests: POST ``urlPrefix/verb`` (prefix without trailing "/"), ``Content-Type:
application/json``, the extender/v1 types with Go's field names as keys (they have no json
tags) and ``null`` for what Go leaves nil; the pod without ``metadata.managedFields``, pods and
nodes without kind and apiVersion (the informers' copies have neither). Answers: a status other
than 200 fails; the first JSON value of the body is decoded as Go's encoding/json does (keys
matched case-insensitively, the last duplicate winning, unknown keys ignored, an int64 never a
fraction). Errors carry kube-scheduler's words (``str(error)``), which its FailedScheduling
events repeat verbatim. The caller decides interest (extenders.interested) and ignorability.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import json
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yarl

from plumb.extensions import extenders

JSON = dict[str, Any]
_INT64 = (-(2**63), 2**63 - 1)
_GO_DEFAULT_PORTS = {"http": 80, "https": 443}


class ExtenderError(Exception):
    """An extender call failed; ``str()`` is kube-scheduler's error text."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class FilterResult:
    """What a filter kept. ``nodes``: the kept node names, in the extender's order.
    ``returned``: the node bodies of an answer taken from its ``Nodes`` list (None when its
    ``NodeNames`` were taken, or there was no call): kube-scheduler scores those as new, empty
    nodes (no pods, nothing requested) carrying the extender's copy of labels and taints.
    ``failed`` (Unschedulable) and ``failed_and_unresolvable`` (UnschedulableAndUnresolvable):
    node name to reason, as answered (names unchecked)."""

    nodes: tuple[str, ...]
    returned: tuple[Mapping[str, Any], ...] | None = None
    failed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    failed_and_unresolvable: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Victims:
    """The pods a preemption would evict on one node (full bodies) and how many PDBs that
    violates."""

    pods: tuple[Mapping[str, Any], ...]
    pdb_violations: int = 0


class ExtenderClient:
    """One extender's client over one aiohttp session (its keep-alive connections reused).
    Built at start: raises ExtenderError ("couldn't build extenders: ...") for TLS settings
    client-go refuses. close() it when done."""

    def __init__(
        self, extender: extenders.Extender, *, session: aiohttp.ClientSession | None = None
    ) -> None:
        self.extender = extender
        self._ssl = ssl_context(extender)
        tls = extenders.transport(extender)
        self._server_name = (tls.server_name or None) if tls is not None else None
        self._session = session
        self._owned = session is None

    async def close(self) -> None:
        if self._owned and self._session is not None:
            await self._session.close()
        self._session = None

    async def filter(
        self, pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any] | str]
    ) -> FilterResult:
        """Filter: ``nodes`` are the framework-feasible nodes, as bodies (a non-cache-capable
        extender is sent them whole) or names (enough for a nodeCacheCapable one)."""
        names = _names(nodes)
        e = self.extender
        if not e.filter_verb:
            return FilterResult(nodes=names)
        answer = await self._send(e.filter_verb, self._args(pod, nodes), "v1.ExtenderFilterResult")
        error = _string(answer, "Error", "ExtenderFilterResult.Error")
        if error:
            raise ExtenderError(error)
        node_names = _field(answer, "NodeNames")
        listed = _field(answer, "Nodes")
        failed = _reasons(answer, "FailedNodes")
        unresolvable = _reasons(answer, "FailedAndUnresolvableNodes")
        if e.node_cache_capable and node_names is not None:
            kept = _string_list(node_names, "ExtenderFilterResult.NodeNames")
            known = set(names)
            for name in kept:
                if name not in known:
                    raise ExtenderError(extenders.unknown_filtered_node(e, name))
            return FilterResult(nodes=kept, failed=failed, failed_and_unresolvable=unresolvable)
        if listed is not None:
            if not isinstance(listed, dict):
                raise ExtenderError(_unmarshal(listed, "ExtenderFilterResult.Nodes", "v1.NodeList"))
            items = _field(listed, "items") or []
            if not isinstance(items, list) or not all(isinstance(n, dict) for n in items):
                raise ExtenderError(
                    _unmarshal(items, "ExtenderFilterResult.Nodes.items", "[]v1.Node")
                )
            bodies = tuple(items)
            return FilterResult(
                nodes=extenders.names_of(bodies),
                returned=bodies,
                failed=failed,
                failed_and_unresolvable=unresolvable,
            )
        # Neither list: every node is dropped, with no reason unless the maps give one.
        return FilterResult(nodes=(), failed=failed, failed_and_unresolvable=unresolvable)

    async def prioritize(
        self, pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any] | str]
    ) -> tuple[tuple[str, int], ...]:
        """Prioritize: the HostPriorityList as answered, (host, score) in its order, duplicates
        and unknown hosts kept (the caller weighs them: extenders.weighted). No verb: ()."""
        e = self.extender
        if not e.prioritize_verb:
            return ()
        answer = await self._send(e.prioritize_verb, self._args(pod, nodes), None)
        if answer is None:
            return ()
        if not isinstance(answer, list):
            raise ExtenderError(_unmarshal(answer, "", "v1.HostPriorityList"))
        out: list[tuple[str, int]] = []
        for item in answer:
            if item is None:
                out.append(("", 0))
                continue
            if not isinstance(item, dict):
                raise ExtenderError(_unmarshal(item, "", "v1.HostPriority"))
            host = _string(item, "Host", "HostPriority.Host")
            score = _field(item, "Score")
            out.append((host, 0 if score is None else _int64(score, "HostPriority.Score")))
        return tuple(out)

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Bind: the extender binds the pod itself; an answer with an Error fails."""
        e = self.extender
        if not e.bind_verb:
            raise ExtenderError("unexpected empty bindVerb in extender")
        args = {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node}
        answer = await self._send(e.bind_verb, args, "v1.ExtenderBindingResult")
        error = _string(answer, "Error", "ExtenderBindingResult.Error")
        if error:
            raise ExtenderError(error)

    async def preempt(
        self, pod: Mapping[str, Any], victims: Mapping[str, Victims]
    ) -> dict[str, tuple[tuple[str, ...], int]]:
        """ProcessPreemption: node to (victim UIDs, NumPDBViolations) as answered (a node
        answered with null victims: no UIDs). The caller turns UIDs back into the node's pods
        (extenders.unknown_victim_node / unknown_victim word what it cannot find)."""
        e = self.extender
        if not e.preempt_verb:
            raise ExtenderError(
                f"preempt verb is not defined for extender {e.name} but run into ProcessPreemption"
            )
        args: JSON = {"Pod": _pod(pod)}
        if e.node_cache_capable:
            args["NodeNameToVictims"] = None
            args["NodeNameToMetaVictims"] = {
                node: {
                    "Pods": [{"UID": _uid(p)} for p in v.pods],
                    "NumPDBViolations": v.pdb_violations,
                }
                for node, v in victims.items()
            }
        else:
            args["NodeNameToVictims"] = {
                node: {"Pods": [_pod(p) for p in v.pods], "NumPDBViolations": v.pdb_violations}
                for node, v in victims.items()
            }
            args["NodeNameToMetaVictims"] = None
        answer = await self._send(e.preempt_verb, args, "v1.ExtenderPreemptionResult")
        meta = _field(answer, "NodeNameToMetaVictims")
        if meta is None:
            return {}
        if not isinstance(meta, dict):
            raise ExtenderError(
                _unmarshal(meta, "ExtenderPreemptionResult.NodeNameToMetaVictims", "map")
            )
        out: dict[str, tuple[tuple[str, ...], int]] = {}
        for node, entry in meta.items():
            if entry is None:
                out[node] = ((), 0)
                continue
            if not isinstance(entry, dict):
                raise ExtenderError(_unmarshal(entry, "", "v1.MetaVictims"))
            pods = _field(entry, "Pods") or []
            if not isinstance(pods, list):
                raise ExtenderError(_unmarshal(pods, "MetaVictims.Pods", "[]*v1.MetaPod"))
            uids = tuple(
                _string(p, "UID", "MetaPod.UID") if isinstance(p, dict) else "" for p in pods
            )
            violations = _field(entry, "NumPDBViolations")
            count = 0 if violations is None else _int64(violations, "MetaVictims.NumPDBViolations")
            out[node] = (uids, count)
        return out

    # The exchange ------------------------------------------------------------------------

    def _args(self, pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any] | str]) -> JSON:
        """ExtenderArgs: node names to a nodeCacheCapable extender, whole nodes otherwise."""
        if self.extender.node_cache_capable:
            return {"Pod": _pod(pod), "Nodes": None, "NodeNames": list(_names(nodes))}
        bodies = []
        for node in nodes:
            if isinstance(node, str):
                raise TypeError(
                    f"{self.extender.name} is not nodeCacheCapable: pass node bodies, not the "
                    f"name {node!r}"
                )
            bodies.append(_bare(node))
        return {"Pod": _pod(pod), "Nodes": {"metadata": {}, "items": bodies}, "NodeNames": None}

    async def _send(self, verb: str, args: JSON, go_type: str | None) -> Any:
        """POSTs args to the verb's URL and decodes the answer, raising ExtenderError with
        Go's words (client.Do's *url.Error, send's status check, the decoder's error)."""
        url = self.extender.url(verb)
        body = json.dumps(args, separators=(",", ":")).encode()
        timeout = self.extender.http_timeout
        stage = "headers"
        try:
            async with asyncio.timeout(timeout):
                session = self._open()
                async with session.post(
                    url,
                    data=body,
                    headers={"Content-Type": "application/json"},
                    ssl=self._ssl if self._ssl is not None else True,
                    # Go's tls.Config.ServerName: the name sent and verified instead of the host.
                    server_hostname=self._server_name if url.startswith("https:") else None,
                ) as response:
                    stage = "body"
                    if response.status != 200:
                        raise ExtenderError(
                            f"failed {verb} with extender at URL {url}, code {response.status}"
                        )
                    text = await response.read()
        except TimeoutError:
            if stage == "headers":
                raise ExtenderError(
                    f'Post "{url}": context deadline exceeded (Client.Timeout exceeded while '
                    "awaiting headers)"
                ) from None
            raise ExtenderError(
                "context deadline exceeded (Client.Timeout or context cancellation while "
                "reading body)"
            ) from None
        except aiohttp.ClientConnectorError as error:
            raise ExtenderError(f'Post "{url}": {_dial_error(url, error)}') from None
        except aiohttp.ClientError as error:
            raise ExtenderError(f'Post "{url}": {error}') from None
        answer = _decode(text)
        if go_type is not None and answer is not None and not isinstance(answer, dict):
            raise ExtenderError(_unmarshal(answer, "", go_type))
        return {} if answer is None and go_type is not None else answer

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            # Go's client follows redirects (10 at most), as aiohttp does.
            # Only the extender's httpTimeout limits an exchange (_send).
            self._session = aiohttp.ClientSession(
                trust_env=False, timeout=aiohttp.ClientTimeout(total=None)
            )
        return self._session


def ssl_context(extender: extenders.Extender) -> ssl.SSLContext | None:
    """The TLS context makeTransport builds (client-go's TLSConfigFor): None for the plain
    transport; TLS 1.2 at least; a CA (data before file) as the only roots; insecure skips
    verification; a client certificate needs both certificate and key. Reads the files and
    raises ExtenderError with kube-scheduler's start-up words."""
    problem = extenders.tls_problem(extender)
    if problem is not None:
        raise ExtenderError(f"couldn't build extenders: {problem}")
    tls = extenders.transport(extender)
    if tls is None:
        return None
    ca = _data_or_file(tls.ca_data, tls.ca_file)
    cert = _data_or_file(tls.cert_data, tls.cert_file)
    key = _data_or_file(tls.key_data, tls.key_file)
    if tls.ca_file and not tls.ca_data:
        found = extenders.ca_problem(ca)
        if found is not None:
            raise ExtenderError(
                f"couldn't build extenders: unable to load root certificates: {found}"
            )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif ca:
        context.load_verify_locations(cadata=ca.decode("ascii", "replace"))
    else:
        context.load_default_certs()
    if cert and key:
        _load_pair(context, cert, key)
    return context


def _data_or_file(data: bytes, file: str) -> bytes:
    """dataFromSliceOrFile: the data if any, else the file's bytes (its error in Go's words)."""
    if data:
        return data
    if not file:
        return b""
    try:
        return Path(file).read_bytes()
    except OSError as error:
        reason = errno.errorcode.get(error.errno or 0, "")
        words = {"ENOENT": "no such file or directory", "EACCES": "permission denied"}
        raise ExtenderError(
            f"couldn't build extenders: open {file}: {words.get(reason, error.strerror)}"
        ) from None


def _load_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl loads a certificate chain from files only.
    with tempfile.TemporaryDirectory() as directory:
        cert_path, key_path = Path(directory, "cert.pem"), Path(directory, "key.pem")
        cert_path.write_bytes(cert)
        key_path.write_bytes(key)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError:
            raise ExtenderError(
                "couldn't build extenders: tls: private key does not match public key"
            ) from None


def _dial_error(url: str, error: aiohttp.ClientConnectorError) -> str:
    """Go's net.OpError for a failed dial: ``dial tcp HOST:PORT: connect: <errno words>``."""
    parsed = yarl.URL(url)
    port = parsed.port or _GO_DEFAULT_PORTS.get(parsed.scheme, 0)
    host = parsed.host or ""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    code = error.os_error.errno if error.os_error is not None else None
    words = {
        errno.ECONNREFUSED: "connection refused",
        errno.EHOSTUNREACH: "no route to host",
        errno.ENETUNREACH: "network is unreachable",
        errno.ETIMEDOUT: "connection timed out",
    }
    if code in words:
        return f"dial tcp {address}: connect: {words[code]}"
    return f"dial tcp {address}: {error.os_error or error}"


# Go's encoding/json, as far as these answers need it -------------------------------------


def _decode(text: bytes) -> Any:
    """The first JSON value of the body (json.Decoder.Decode), or Go's error words."""
    stripped = text.decode("utf-8", "replace").lstrip(" \t\r\n")
    if not stripped:
        raise ExtenderError("EOF")
    try:
        value, _end = json.JSONDecoder().raw_decode(stripped)
    except json.JSONDecodeError as error:
        if error.pos >= len(stripped):
            raise ExtenderError("unexpected EOF") from None
        char = stripped[error.pos]
        raise ExtenderError(
            f"invalid character {_go_char(char)} looking for beginning of value"
        ) from None
    return value


def _go_char(char: str) -> str:
    return "'\\''" if char == "'" else f"'{char}'"


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """A struct field as Go decodes it: any key equal to the name ignoring case, the last such
    key winning."""
    found = None
    lowered = name.lower()
    for key, value in obj.items():
        if key.lower() == lowered:
            found = value
    return found


def _string(obj: Any, name: str, where: str) -> str:
    if not isinstance(obj, dict):
        return ""
    value = _field(obj, name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ExtenderError(_unmarshal(value, where, "string"))
    return value


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ExtenderError(_unmarshal(value, where, "[]string"))
    for item in value:
        if item is not None and not isinstance(item, str):
            raise ExtenderError(_unmarshal(item, where, "string"))
    return tuple(item or "" for item in value)


def _reasons(obj: Mapping[str, Any], name: str) -> dict[str, str]:
    value = _field(obj, name)
    if value is None:
        return {}
    where = f"ExtenderFilterResult.{name}"
    if not isinstance(value, dict):
        raise ExtenderError(_unmarshal(value, where, "v1.FailedNodesMap"))
    out: dict[str, str] = {}
    for node, reason in value.items():
        if reason is not None and not isinstance(reason, str):
            raise ExtenderError(_unmarshal(reason, f"{where}.{node}", "string"))
        out[str(node)] = reason or ""
    return out


def _int64(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExtenderError(_unmarshal(value, where, "int64"))
    if isinstance(value, float) or not _INT64[0] <= value <= _INT64[1]:
        raise ExtenderError(_unmarshal(value, where, "int64"))
    return value


def _unmarshal(value: Any, where: str, go_type: str) -> str:
    """encoding/json's UnmarshalTypeError words."""
    if isinstance(value, bool):
        shown = "bool"
    elif isinstance(value, int | float):
        shown = f"number {json.dumps(value)}"
    elif isinstance(value, str):
        shown = "string"
    elif isinstance(value, list):
        shown = "array"
    else:
        shown = "object"
    if where:
        return f"json: cannot unmarshal {shown} into Go struct field {where} of type {go_type}"
    return f"json: cannot unmarshal {shown} into Go value of type {go_type}"


# What is sent -------------------------------------------------------------------------------


def _names(nodes: Sequence[Mapping[str, Any] | str]) -> tuple[str, ...]:
    return tuple(node if isinstance(node, str) else extenders.names_of([node])[0] for node in nodes)


def _bare(body: Mapping[str, Any]) -> JSON:
    """An object as an informer holds it: no kind, no apiVersion."""
    return {k: v for k, v in body.items() if k not in ("kind", "apiVersion")}


def _pod(body: Mapping[str, Any]) -> JSON:
    """A pod as the scheduler's pod informer holds it: no managedFields either."""
    pod = _bare(body)
    metadata = pod.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        pod["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    return pod


def _uid(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")
