"""AcceleratorPacking and PriceLabel over hand-built NodeViews, and plumb's checks of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from plumb.extensions import arguments, enabling, interface, judgements, registry

from plumb_accelerator_packing import prices
from plumb_accelerator_packing.packing import AcceleratorPacking, PackingArgs
from plumb_accelerator_packing.prices import PriceArgs, PriceLabel

GPU = "nvidia.com/gpu"


def pod(requests: Mapping[str, int]) -> interface.PodView:
    return interface.PodView(
        namespace="ml",
        name="train-0",
        uid="uid-train-0",
        labels={},
        requests=dict(requests),
        priority=0,
        scheduler_name="plumb-accelerators",
    )


def view(
    allocatable: Mapping[str, Sequence[int]] | None = None,
    requested: Mapping[str, Sequence[int]] | None = None,
    labels: Sequence[Mapping[str, str]] = (),
    count: int | None = None,
) -> interface.NodeView:
    """A NodeView of ``count`` nodes: resources by column, labels by node."""
    if count is None:
        count = len(labels) or len(next(iter((allocatable or {}).values())))

    def column(table: Mapping[str, Sequence[int]] | None, resource: str) -> interface.Ints:
        return np.array((table or {}).get(resource, [0] * count), dtype=np.int64)

    return interface.NodeView(
        tuple(f"node-{i}" for i in range(count)),
        now=0.0,
        labels=lambda key: np.array(
            [n.get(key, "") for n in labels] if labels else [""] * count, dtype=np.object_
        ),
        annotations=lambda key: np.full(count, "", dtype=np.object_),
        allocatable=lambda resource: column(allocatable, resource),
        requested=lambda resource: column(requested, resource),
        taints=lambda key: np.zeros(count, dtype=np.bool_),
    )


# AcceleratorPacking ---------------------------------------------------------------------------


def test_the_fullest_node_scores_highest() -> None:
    nodes = view(
        allocatable={GPU: [8, 8, 8, 0, 4]},
        requested={GPU: [6, 0, 3, 0, 4]},
    )
    scores = AcceleratorPacking().score(pod({GPU: 1, "cpu": 1000}), nodes)
    # 7/8, 1/8, 4/8; no GPUs; 5/4 (NodeResourcesFit rejects it) capped at 100.
    assert scores.tolist() == [87, 12, 50, 0, 100]
    assert scores.dtype == np.int64


def test_a_pod_without_accelerators_scores_zero_everywhere() -> None:
    nodes = view(allocatable={GPU: [8, 8]}, requested={GPU: [7, 0]})
    assert AcceleratorPacking().score(pod({"cpu": 500}), nodes).tolist() == [0, 0]


def test_several_resources_average_their_shares() -> None:
    args = arguments.decode(PackingArgs, {"resources": [GPU, "amd.com/gpu"]})
    assert args.resources == (GPU, "amd.com/gpu")
    nodes = view(
        allocatable={GPU: [4, 4, 0], "amd.com/gpu": [2, 0, 2]},
        requested={GPU: [1, 3, 0], "amd.com/gpu": [0, 0, 1]},
    )
    plugin = AcceleratorPacking(args)
    # Only the resources the pod requests count.
    assert plugin.score(pod({GPU: 1}), nodes).tolist() == [50, 100, 0]
    # Both: (50 + 50) // 2, (100 + 0) // 2, (0 + 100) // 2.
    assert plugin.score(pod({GPU: 1, "amd.com/gpu": 1}), nodes).tolist() == [50, 50, 50]


def test_another_resource_by_args() -> None:
    plugin = AcceleratorPacking(arguments.decode(PackingArgs, {"resources": ["example.com/tpu"]}))
    nodes = view(
        allocatable={GPU: [8, 8], "example.com/tpu": [4, 4]},
        requested={GPU: [7, 0], "example.com/tpu": [0, 2]},
    )
    assert plugin.score(pod({GPU: 1}), nodes).tolist() == [0, 0]
    assert plugin.score(pod({"example.com/tpu": 2}), nodes).tolist() == [50, 100]


def test_five_thousand_nodes_in_one_call() -> None:
    count = 5000
    allocatable = [8] * count
    requested = [i % 9 for i in range(count)]  # 8 of every 9 nodes still hold one more
    nodes = view(allocatable={GPU: allocatable}, requested={GPU: requested})
    scores = AcceleratorPacking().score(pod({GPU: 1}), nodes)
    assert scores.shape == (count,)
    assert scores[:9].tolist() == [12, 25, 37, 50, 62, 75, 87, 100, 100]


# PriceLabel -----------------------------------------------------------------------------------

PRICE = prices.DEFAULT_LABEL


def test_raw_scores_are_millicents() -> None:
    nodes = view(labels=[{PRICE: "2.48"}, {PRICE: "0.5"}, {PRICE: "0"}, {PRICE: "1.000005"}])
    assert PriceLabel().score(pod({}), nodes).tolist() == [248000, 50000, 0, 100001]


def test_a_node_without_a_price_gets_the_highest_seen() -> None:
    nodes = view(
        labels=[{PRICE: "1.25"}, {}, {PRICE: "3"}, {PRICE: "cheap"}, {PRICE: "-1"}, {PRICE: "1e3"}]
    )
    assert PriceLabel().score(pod({}), nodes).tolist() == [
        125000,
        300000,
        300000,
        300000,
        300000,
        300000,
    ]


def test_no_price_anywhere_gives_no_preference() -> None:
    nodes = view(labels=[{}, {PRICE: "n/a"}, {}])
    raw = PriceLabel().score(pod({}), nodes)
    assert raw.tolist() == [0, 0, 0]
    passing = np.ones(3, dtype=np.bool_)
    assert judgements.normalised(raw, interface.REVERSED, passing).tolist() == [100, 100, 100]


def test_reversed_normalisation_never_favours_an_unpriced_node() -> None:
    # node-3, the most expensive, fails a filter; the unpriced node-2 passes.
    nodes = view(labels=[{PRICE: "1"}, {PRICE: "2"}, {}, {PRICE: "4"}])
    raw = PriceLabel().score(pod({}), nodes)
    passing = np.array([True, True, True, False])
    final = judgements.normalised(raw, interface.REVERSED, passing)
    assert final[:3].tolist() == [75, 50, 0]
    # Had the unpriced node failed too, the scale would be the priced passing nodes' own.
    assert judgements.normalised(raw, interface.REVERSED, passing & (raw < 400000))[
        :2
    ].tolist() == [50, 0]


def test_a_huge_price_is_unreadable_rather_than_an_overflow() -> None:
    nodes = view(labels=[{PRICE: "9" * 40}, {PRICE: "2"}])
    assert PriceLabel().score(pod({}), nodes).tolist() == [200000, 200000]
    assert prices.millicents(str(prices.HIGHEST_PRICE)) == prices.HIGHEST_PRICE * prices.MILLICENTS


def test_the_label_key_comes_from_the_args() -> None:
    plugin = PriceLabel(arguments.decode(PriceArgs, {"label": "example.com/price"}))
    nodes = view(labels=[{PRICE: "1", "example.com/price": "3"}, {"example.com/price": "2"}])
    assert plugin.score(pod({}), nodes).tolist() == [300000, 200000]


# Both, as plumb takes them -----------------------------------------------------------------


def test_plumb_accepts_their_answers() -> None:
    found = registry.of(AcceleratorPacking, PriceLabel)
    assert {n: (p.points, p.problem) for n, p in found.plugins.items()} == {
        "AcceleratorPacking": ((interface.SCORE,), ""),
        "PriceLabel": ((interface.SCORE,), ""),
    }
    score = frozenset({interface.SCORE})
    packing = enabling.enable(found.plugins["AcceleratorPacking"], score, 5, None)
    pricing = enabling.enable(found.plugins["PriceLabel"], score, 1, {"label": PRICE})
    assert (packing.normalize, packing.batch_dependent) == (interface.AS_IS, True)
    assert (pricing.normalize, pricing.batch_dependent) == (interface.REVERSED, False)
    plugins = [(e, enabling.instance(e, found)) for e in (packing, pricing)]
    nodes = view(
        allocatable={GPU: [8, 8, 4]},
        requested={GPU: [2, 0, 4]},
        labels=[{PRICE: "3.2"}, {PRICE: "2.4"}, {}],
    )
    judgement = judgements.judge(pod({GPU: 2}), nodes, plugins)
    assert judgement.failure is None
    assert judgement.scores["AcceleratorPacking"].tolist() == [50, 25, 100]
    assert judgement.scores["PriceLabel"].tolist() == [320000, 240000, 320000]


@pytest.mark.parametrize(
    ("kind", "raw", "field", "words"),
    [
        (
            PackingArgs,
            {"resources": "nvidia.com/gpu"},
            "resources",
            'must be a list, got string "nvidia.com/gpu"',
        ),
        (PackingArgs, {"resources": [GPU, 1]}, "resources[1]", "must be a string, got number 1"),
        (PackingArgs, {"resources": []}, "", "resources: must name at least one resource"),
        (
            PackingArgs,
            {"resources": [GPU, GPU]},
            "",
            "resources: ['nvidia.com/gpu', 'nvidia.com/gpu'] names a resource twice",
        ),
        (PriceArgs, {"labelKey": PRICE}, "labelKey", "unknown field"),
        (PriceArgs, {"label": "a price"}, "", "label: 'a price' is not a label key"),
    ],
)
def test_bad_args_are_refused_naming_the_field(
    kind: type[object], raw: Mapping[str, object], field: str, words: str
) -> None:
    with pytest.raises(arguments.ArgsError) as refused:
        arguments.decode(kind, raw)
    assert (refused.value.field, refused.value.message) == (field, words)
