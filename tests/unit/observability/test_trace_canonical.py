"""The canonical JSON that trace hashes are taken over: orjson writes what json wrote, byte for
byte, so a hash does not depend on which encoder made it."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from plumb.observability import trace


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    weight: int
    labels: tuple[tuple[str, str], ...] = ()
    version: str = dataclasses.field(default="", compare=False)


def _by_json(value: object) -> bytes:
    """The canonical JSON as json writes it (the encoder before orjson)."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=trace._jsonable,
    ).encode()


_text = st.text(max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15).filter(
        lambda f: "e" not in repr(f)
    )
    | _text
    | st.sampled_from(list(Colour))
    | st.builds(
        Spec,
        name=_text,
        weight=st.integers(-100, 100),
        labels=st.lists(st.tuples(_text, _text), max_size=3).map(tuple),
        version=_text,
    )
    | st.frozensets(_text, max_size=4)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_text, inner, max_size=4)
    ),
    max_leaves=20,
)


@given(_values)
def test_orjson_writes_the_bytes_json_wrote(value: Any) -> None:
    assert trace.canonical(value) == _by_json(value)


def test_what_orjson_refuses_is_written_by_json() -> None:
    value = {"big": 2**70, "small": [1, {3: "an int key"}]}
    assert trace.canonical(value) == _by_json(value)


def test_a_dataclass_is_its_compared_fields_only() -> None:
    one = Spec(name="web", weight=1, version="1")
    other = Spec(name="web", weight=1, version="2")
    expected = b'{"labels":[],"name":"web","weight":1}'
    assert trace.canonical(one) == trace.canonical(other) == expected
    assert trace.digest(one) == trace.digest(other)
