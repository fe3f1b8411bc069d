"""The API client's JSON: orjson for speed, with json's answers where orjson would refuse."""

from __future__ import annotations

import json

import pytest

from plumb.k8s import client


def test_a_body_encodes_to_the_json_it_was() -> None:
    event: dict[str, object] = {
        "metadata": {"generateName": "web-1."},
        "note": "Successfully assigned shop/web-1 ✓",
        "count": 3,
    }
    assert json.loads(client.encode(event)) == event
    assert b" " not in client.encode({"a": [1, 2], "b": None})  # compact, as the API expects


def test_what_orjson_refuses_is_still_written_and_read() -> None:
    huge = {"value": 2**70}  # orjson stops at 64 bits
    assert json.loads(client.encode(huge)) == huge
    assert client.decode(b'{"ratio": NaN}')["ratio"] != 0  # json reads NaN; orjson does not


def test_a_malformed_document_raises_a_value_error() -> None:
    with pytest.raises(ValueError, match="Expecting"):
        client.decode(b'{"type": "ADDED", ')
