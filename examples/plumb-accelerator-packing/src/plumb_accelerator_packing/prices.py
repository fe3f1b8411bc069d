"""The PriceLabel Score: cheaper nodes are preferred, by the hourly price on a node label.

A node's label (``plumb.io/hourly-price`` unless ``args.label`` names another key) holds its
price per hour as a plain decimal number of currency units (``2.48``); the raw score is that
price in millicents (248000) and plumb normalises it REVERSED over the nodes every filter
passed: the most expensive of them scores 0, the others ``100 - price * 100 // highest``, so a
free node (price 0) scores 100.

Under REVERSED a raw 0 is the best score, so a node without a price cannot be given 0: it
would look free. A node whose label is missing, or unreadable (not a plain non-negative
decimal, or above 1,000,000,000 an hour), is given the highest price read on any node: it
scores 0 whenever it passes the filters, as the most expensive node would, and it never
pushes another node's normalised score below 0. When no node carries a readable price every
node scores 0 raw, which REVERSED turns into 100 everywhere: the plugin has no say.
"""

from __future__ import annotations

import dataclasses
import decimal
import functools
import re

import numpy as np
from plumb.extensions import interface

DEFAULT_LABEL = "plumb.io/hourly-price"
MILLICENTS = 100_000  # per currency unit
UNREADABLE = -1
# Far above any node's price, and small enough that plumb's normalisation (price * 100) stays
# within int64.
HIGHEST_PRICE = 1_000_000_000

_PRICE = re.compile(r"\d+(\.\d+)?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PriceArgs:
    """PriceLabel's pluginConfig args: the node label that holds the hourly price."""

    label: str = DEFAULT_LABEL

    def __post_init__(self) -> None:
        prefix, slash, name = self.label.rpartition("/")
        if not (
            _NAME.fullmatch(name)
            and len(name) <= 63
            and (not slash or (_PREFIX.fullmatch(prefix) and len(prefix) <= 253))
        ):
            raise ValueError(f"label: {self.label!r} is not a label key")


@functools.lru_cache(maxsize=4096)
def millicents(value: str) -> int:
    """A label value's price in millicents (rounded half up), UNREADABLE if it is none."""
    if not _PRICE.fullmatch(value):
        return UNREADABLE
    price = decimal.Decimal(value)
    if price > HIGHEST_PRICE:
        return UNREADABLE
    return int((price * MILLICENTS).to_integral_value(rounding=decimal.ROUND_HALF_UP))


class PriceLabel(interface.Plugin):
    """Scores each node by its hourly price, the cheapest best (REVERSED)."""

    name = "PriceLabel"
    Args = PriceArgs
    normalize = interface.REVERSED

    def __init__(self, args: PriceArgs | None = None) -> None:
        super().__init__(args if args is not None else PriceArgs())
        self.settings: PriceArgs = self.args

    def score(self, pod: interface.PodView, nodes: interface.NodeView) -> interface.Ints:
        # The nodes' prices alone: read once per cycle, the same array for every pod.
        return nodes.kept((self.name, self.settings.label), lambda: self._prices(nodes))

    def _prices(self, nodes: interface.NodeView) -> interface.Ints:
        # Each distinct value parsed once; a node without the label indexes the last entry.
        ids, values = nodes.label_ids(self.settings.label)
        prices = np.array([*(millicents(v) for v in values), UNREADABLE], dtype=np.int64)
        raw = prices[ids]
        unpriced = raw == UNREADABLE
        if unpriced.any():
            raw[unpriced] = raw.max(initial=0)
        return raw
