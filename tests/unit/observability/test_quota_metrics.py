"""The tenant quota metrics on their own: the gauges as the reader's rows give them (no series for
an unlimited max), the refusals counted by namespace and rule, on the page from 0 for every quota
namespace, and a page that stays whole when the reader fails."""

from __future__ import annotations

from prometheus_client import parser

from plumb.observability import metrics

Series = dict[tuple[str, ...], float]


def _family(m: metrics.Metrics, name: str) -> Series:
    for family in parser.text_string_to_metric_families(m.render().decode()):
        if family.name == name.removesuffix("_total"):
            assert family.type == metrics.KINDS[name]
            labels = metrics.LABELS[name]
            return {tuple(s.labels[label] for label in labels): s.value for s in family.samples}
    raise AssertionError(f"{name} is not on the page")


def _row(
    namespace: str, resource: str, used: float, low: float, high: float | None
) -> metrics.QuotaRow:
    return metrics.QuotaRow(namespace=namespace, resource=resource, used=used, min=low, max=high)


ROWS = [
    _row("team-a", "cpu", 1.5, 2.0, 4.0),
    _row("team-a", "memory", 2**30, 2**31, None),  # unlimited
    _row("team-b", "cpu", 0.0, 1.0, 1.0),
]


def test_the_gauges_are_the_rows_and_an_unlimited_max_has_no_series() -> None:
    m = metrics.Metrics()
    m.quotas_from(lambda: ROWS)
    assert _family(m, metrics.QUOTA_USED) == {
        ("team-a", "cpu"): 1.5,
        ("team-a", "memory"): 2.0**30,
        ("team-b", "cpu"): 0.0,
    }
    assert _family(m, metrics.QUOTA_MIN) == {
        ("team-a", "cpu"): 2.0,
        ("team-a", "memory"): 2.0**31,
        ("team-b", "cpu"): 1.0,
    }
    assert _family(m, metrics.QUOTA_MAX) == {("team-a", "cpu"): 4.0, ("team-b", "cpu"): 1.0}


def test_the_rows_are_read_at_each_scrape() -> None:
    m = metrics.Metrics()
    rows = list(ROWS)
    m.quotas_from(lambda: rows)
    rows[0] = _row("team-a", "cpu", 3.0, 2.0, 4.0)
    del rows[2]  # team-b's quota deleted
    assert _family(m, metrics.QUOTA_USED) == {("team-a", "cpu"): 3.0, ("team-a", "memory"): 2**30}


def test_refusals_count_by_namespace_and_rule_from_0_for_every_quota_namespace() -> None:
    m = metrics.Metrics()
    assert _family(m, metrics.QUOTA_REFUSALS) == {}  # no quotas, no series
    m.quotas_from(lambda: ROWS)
    assert _family(m, metrics.QUOTA_REFUSALS) == {
        ("team-a", "max"): 0.0,
        ("team-a", "min"): 0.0,
        ("team-b", "max"): 0.0,
        ("team-b", "min"): 0.0,
    }
    m.quota_refusal("team-a", metrics.OVER_MAX)
    m.quota_refusal("team-a", metrics.OVER_MAX)
    m.quota_refusal("team-b", metrics.OVER_MIN)
    m.quota_refusal("team-c", metrics.OVER_MAX)  # its quota deleted since: the count stays
    assert _family(m, metrics.QUOTA_REFUSALS) == {
        ("team-a", "max"): 2.0,
        ("team-a", "min"): 0.0,
        ("team-b", "max"): 0.0,
        ("team-b", "min"): 1.0,
        ("team-c", "max"): 1.0,
    }


def test_a_reader_that_fails_leaves_the_gauges_empty_and_the_counts_on_the_page() -> None:
    m = metrics.Metrics()

    def broken() -> list[metrics.QuotaRow]:
        raise RuntimeError("the store went away")

    m.quotas_from(broken)
    m.quota_refusal("team-a", metrics.OVER_MIN)
    assert _family(m, metrics.QUOTA_USED) == {}
    assert _family(m, metrics.QUOTA_MAX) == {}
    assert _family(m, metrics.QUOTA_REFUSALS) == {("team-a", "min"): 1.0}
    assert _family(m, metrics.LEADER) == {(): 0.0}  # the rest of the page is there


def test_the_quota_series_are_named_for_promql_and_the_dashboard() -> None:
    assert {
        metrics.QUOTA_USED,
        metrics.QUOTA_MIN,
        metrics.QUOTA_MAX,
        metrics.QUOTA_REFUSALS,
    } <= metrics.SERIES
    assert metrics.QUOTA_RULES == ("max", "min")
    page = metrics.Metrics().render().decode()
    assert "# TYPE plumb_quota_refusals_total counter\n" in page
    assert "# TYPE plumb_quota_used gauge\n" in page
