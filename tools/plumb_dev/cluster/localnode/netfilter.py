"""Netfilter objects iptables cannot remove: kube-proxy's nfacct counters, iptables-nft's tables.

kube-proxy creates named packet counters (``ct_state_invalid_dropped_pkts``,
``localhost_nps_accepted_pkts``) that outlive it and its rules, and iptables-nft creates a table
(filter, nat, mangle) on first use that no iptables command deletes. Neither ``nfacct`` nor
``nft`` is installed here, so both are handled with a few netlink messages. A counter still used
by a rule cannot be deleted, and only an empty table is ever deleted: remove rules first.
"""

from __future__ import annotations

import os
import socket
import struct

_NETLINK_NETFILTER = 12
_SUBSYS_NFTABLES = 10
_SUBSYS_ACCT = 7
_ACCT_GET = 1  # NFNL_MSG_ACCT_GET; 2 would be GET_CTRZERO, which zeroes the counters
_ACCT_DEL = 3
_NFT_DELTABLE = 2
_BATCH_BEGIN = 0x10
_BATCH_END = 0x11
_ATTR_NAME = 1  # NFACCT_NAME and NFTA_TABLE_NAME alike
_NLM_F_REQUEST = 0x1
_NLM_F_ACK = 0x4
_NLM_F_DUMP = 0x300
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_HEADER = struct.Struct("=LHHLL")
# The address family of iptables (ip) and ip6tables (ip6) tables in nf_tables.
NFPROTO = {"iptables": 2, "ip6tables": 10}


def _align(length: int) -> int:
    return (length + 3) & ~3


def _nfgen(family: int = socket.AF_UNSPEC, resource: int = 0) -> bytes:
    # nfgenmsg: address family, version, resource id (big-endian).
    return struct.pack("=BBH", family, 0, socket.htons(resource))


def _message(kind: int, flags: int, body: bytes, sequence: int = 1) -> bytes:
    return _HEADER.pack(_HEADER.size + len(body), kind, flags, sequence, 0) + body


def _name_attribute(name: str) -> bytes:
    value = name.encode() + b"\0"
    attribute = struct.pack("=HH", 4 + len(value), _ATTR_NAME) + value
    return attribute + b"\0" * (_align(len(attribute)) - len(attribute))


def parse_names(data: bytes) -> tuple[list[str], bool]:
    """The counter names in a batch of netlink replies, and whether the dump is complete."""
    names: list[str] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
        if kind in (_NLMSG_DONE, _NLMSG_ERROR) or length < _HEADER.size:
            return names, True
        position = offset + _HEADER.size + len(_nfgen())
        while position + 4 <= offset + length:
            size, attribute = struct.unpack_from("=HH", data, position)
            if size < 4:
                break
            if attribute & 0x7FFF == _ATTR_NAME:
                names.append(data[position + 4 : position + size].rstrip(b"\0").decode())
            position += _align(size)
        offset += _align(length)
    return names, False


def _error_code(reply: bytes) -> int:
    """The errno of the first acknowledgement in reply (0: success)."""
    offset = 0
    while offset + _HEADER.size + 4 <= len(reply):
        length, kind, _, _, _ = _HEADER.unpack_from(reply, offset)
        if kind == _NLMSG_ERROR:
            code: int = struct.unpack_from("=i", reply, offset + _HEADER.size)[0]
            return -code
        if length < _HEADER.size:
            break
        offset += _align(length)
    return 0


def _exchange(message: bytes, *, dump: bool = False) -> list[bytes]:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_NETFILTER) as sock:
        sock.bind((0, 0))
        sock.settimeout(5)
        sock.send(message)
        replies = [sock.recv(65536)]
        while dump and not parse_names(replies[-1])[1]:
            replies.append(sock.recv(65536))
        return replies


def counters() -> tuple[str, ...]:
    """The names of every nfacct counter; empty if the kernel has no nfacct support."""
    request = _message((_SUBSYS_ACCT << 8) | _ACCT_GET, _NLM_F_REQUEST | _NLM_F_DUMP, _nfgen())
    try:
        replies = _exchange(request, dump=True)
    except OSError:
        return ()
    return tuple(sorted(name for reply in replies for name in parse_names(reply)[0]))


def delete_counter(name: str) -> str | None:
    """Deletes the counter; None on success, else what went wrong."""
    body = _nfgen() + _name_attribute(name)
    request = _message((_SUBSYS_ACCT << 8) | _ACCT_DEL, _NLM_F_REQUEST | _NLM_F_ACK, body)
    try:
        code = _error_code(_exchange(request)[0])
    except OSError as error:
        return f"could not delete nfacct counter {name}: {error}"
    return None if code == 0 else f"could not delete nfacct counter {name}: {os.strerror(code)}"


def delete_table_message(family: str, name: str) -> bytes:
    """The nf_tables batch that deletes table name of family ("iptables"/"ip6tables")."""
    batch = _nfgen(resource=_SUBSYS_NFTABLES)
    return b"".join(
        [
            _message(_BATCH_BEGIN, _NLM_F_REQUEST, batch, 1),
            _message(
                (_SUBSYS_NFTABLES << 8) | _NFT_DELTABLE,
                _NLM_F_REQUEST | _NLM_F_ACK,
                _nfgen(NFPROTO[family]) + _name_attribute(name),
                2,
            ),
            _message(_BATCH_END, _NLM_F_REQUEST, batch, 3),
        ]
    )


def delete_table(family: str, name: str) -> str | None:
    """Deletes an nf_tables table with its (empty) chains; None on success, else what failed."""
    try:
        code = _error_code(_exchange(delete_table_message(family, name))[0])
    except OSError as error:
        return f"could not delete {family} table {name}: {error}"
    return None if code == 0 else f"could not delete {family} table {name}: {os.strerror(code)}"
