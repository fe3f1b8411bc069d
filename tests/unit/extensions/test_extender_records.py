"""extenders: which pods an extender is interested in (IsInterested), the order buildExtenders
calls them in, and the TLS settings client-go refuses, in its words."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from plumb.extensions import extenders
from plumb.extensions.extenders import Extender, ManagedResource, Tls

GPU = "example.com/gpu"


def pod(containers: Any = (), init: Any = (), **spec: Any) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": "c", "resources": r} for r in containers],
            "initContainers": [{"name": "i", "resources": r} for r in init],
            **spec,
        }
    }


MANAGES_GPU = Extender(url_prefix="http://e", managed_resources=(ManagedResource(name=GPU),))


@pytest.mark.parametrize(
    ("body", "wanted"),
    [
        (pod([{"requests": {GPU: "1"}}]), True),
        (pod([{"limits": {GPU: "1"}}]), True),
        (pod([{"requests": {GPU: "0"}}]), True),  # present at 0 still counts
        (pod([{}], init=[{"requests": {GPU: "1"}}]), True),
        (pod([{"requests": {"cpu": "1"}}]), False),
        (pod([{}], resources={"requests": {GPU: "1"}}), False),  # pod-level resources
        (pod([{}], ephemeralContainers=[{"resources": {"requests": {GPU: "1"}}}]), False),
    ],
)
def test_interest_is_a_managed_name_among_container_resources(
    body: dict[str, Any], wanted: bool
) -> None:
    assert extenders.interested(MANAGES_GPU, body) is wanted


def test_an_extender_managing_nothing_wants_every_pod() -> None:
    assert extenders.interested(Extender(url_prefix="x"), pod())


def test_ignorable_extenders_come_last_each_in_file_order() -> None:
    a, b, c, d = (
        Extender(url_prefix=name, ignorable=name in "ac") for name in ("a", "b", "c", "d")
    )
    assert [e.name for e in extenders.ordered([a, b, c, d])] == ["b", "d", "a", "c"]


def test_ignored_by_scheduler_names_in_file_order() -> None:
    e1 = Extender(
        url_prefix="1",
        managed_resources=(
            ManagedResource(name="x.io/a", ignored_by_scheduler=True),
            ManagedResource(name="x.io/b"),
        ),
    )
    e2 = Extender(
        url_prefix="2",
        managed_resources=(ManagedResource(name="x.io/c", ignored_by_scheduler=True),),
    )
    assert extenders.ignored_by_scheduler([e1, e2]) == ("x.io/a", "x.io/c")


def test_url_and_weighted_score() -> None:
    e = Extender(url_prefix="http://h:1/p//", weight=2)
    assert e.url("filter") == "http://h:1/p/filter"
    assert e.url("/filter") == "http://h:1/p//filter"
    assert extenders.weighted(7, e) == 140
    assert extenders.weighted(-1, e) == -20


def certificate(tmp_path: Path) -> tuple[bytes, bytes]:
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=x", "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "c.pem"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return (tmp_path / "c.pem").read_bytes(), (tmp_path / "k.pem").read_bytes()


@pytest.mark.parametrize(
    ("tls", "enable_https", "words"),
    [
        (Tls(), False, None),
        (Tls(insecure=True, ca_data=b"x"), False, extenders.INSECURE_WITH_CA),
        (Tls(insecure=True, ca_file="/ca"), True, extenders.INSECURE_WITH_CA),
        (
            Tls(ca_data=b"junk"),
            False,
            "unable to load root certificates: unable to parse bytes as PEM block",
        ),
        (
            Tls(ca_data=b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            False,
            "unable to load root certificates: failed to parse certificate: x509: malformed "
            "certificate",
        ),
        (
            Tls(ca_data=b"-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n"),
            False,
            "unable to load root certificates: no valid certificate authority data seen",
        ),
        (
            Tls(cert_data=b"junk", key_file="/k"),
            False,
            "tls: failed to find any PEM data in certificate input",
        ),
        (Tls(cert_data=b"junk"), False, None),  # a certificate needs a key too
        (Tls(cert_file="/c", key_file="/k"), False, None),  # files only: loaded at handshakes
    ],
)
def test_tls_problems_in_client_go_s_words(tls: Tls, enable_https: bool, words: str | None) -> None:
    e = Extender(url_prefix="https://x", tls=tls, enable_https=enable_https)
    assert extenders.tls_problem(e) == words


def test_valid_tls_data_passes_and_loads(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    e = Extender(url_prefix="https://x", tls=Tls(ca_data=cert, cert_data=cert, key_data=key))
    assert extenders.tls_problem(e) is None
    assert extenders.ca_problem(cert + b"trailing") is None  # one parsed certificate suffices
