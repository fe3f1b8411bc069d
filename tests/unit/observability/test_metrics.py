"""The metric module on its own: kube-scheduler's names and buckets, label values from small
fixed sets, and a page Prometheus can parse."""

from __future__ import annotations

import itertools

from prometheus_client import parser

from plumb.observability import metrics


def _bucket_bounds(page: str, name: str) -> list[str]:
    for family in parser.text_string_to_metric_families(page):
        if family.name == name:
            bounds = [s.labels["le"] for s in family.samples if s.name == f"{name}_bucket"]
            return list(dict.fromkeys(bounds))
    raise AssertionError(f"{name} is not on the page")


def test_latency_buckets_are_kube_schedulers_1ms_doubling_to_16s() -> None:
    assert metrics.ATTEMPT_BUCKETS[0] == 0.001
    assert len(metrics.ATTEMPT_BUCKETS) == 15
    assert metrics.ATTEMPT_BUCKETS[-1] == 16.384
    assert all(b == a * 2 for a, b in itertools.pairwise(metrics.ATTEMPT_BUCKETS))
    m = metrics.Metrics()
    m.attempt(metrics.SCHEDULED, 0.0015)
    m.kernel_run(0.0004)
    m.binding(metrics.BOUND, 0.02)
    page = m.render().decode()
    expected = [
        "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128", "0.256",
        "0.512", "1.024", "2.048", "4.096", "8.192", "16.384", "+Inf",
    ]  # fmt: skip
    assert _bucket_bounds(page, metrics.ATTEMPT_DURATION) == expected
    assert _bucket_bounds(page, metrics.KERNEL_DURATION) == expected
    assert _bucket_bounds(page, metrics.BINDING_DURATION) == expected


def test_sli_buckets_reach_minutes_as_kube_schedulers_do() -> None:
    assert metrics.SLI_BUCKETS[0] == 0.01
    assert len(metrics.SLI_BUCKETS) == 20
    assert round(metrics.SLI_BUCKETS[-1], 2) == 5242.88  # ~87 minutes
    m = metrics.Metrics()
    m.pod_scheduled(0.5, 1)
    page = m.render().decode()
    assert _bucket_bounds(page, metrics.SLI_DURATION)[-2:] == ["5242.88", "+Inf"]


def test_an_observation_lands_in_the_first_bucket_that_holds_it() -> None:
    m = metrics.Metrics()
    m.attempt(metrics.UNSCHEDULABLE, 0.003)  # in (0.002, 0.004]
    m.attempt(metrics.UNSCHEDULABLE, 0.004)  # a bound is inclusive: le="0.004"
    m.attempt(metrics.UNSCHEDULABLE, 20.0)  # beyond the last bound: +Inf only
    families = {f.name: f for f in parser.text_string_to_metric_families(m.render().decode())}
    buckets = {
        s.labels["le"]: s.value
        for s in families[metrics.ATTEMPT_DURATION].samples
        if s.name.endswith("_bucket") and s.labels["result"] == metrics.UNSCHEDULABLE
    }
    assert (buckets["0.002"], buckets["0.004"], buckets["16.384"], buckets["+Inf"]) == (0, 2, 2, 3)


def test_attempts_label_is_capped_at_15_plus_as_kube_scheduler_does() -> None:
    assert [metrics.attempts_label(n) for n in (1, 2, 14, 15, 16, 1000)] == [
        "1", "2", "14", "15+", "15+", "15+",
    ]  # fmt: skip
    m = metrics.Metrics()
    for attempts in range(1, 40):
        m.pod_scheduled(1.0, attempts)
    families = {f.name: f for f in parser.text_string_to_metric_families(m.render().decode())}
    counts = {
        s.labels["attempts"]: s.value
        for s in families[metrics.SLI_DURATION].samples
        if s.name.endswith("_count")
    }
    assert len(counts) == 15  # bounded, whatever the pods do
    assert counts["1"] == 1
    assert counts["15+"] == 39 - 14


def test_the_names_are_kube_schedulers_under_plumb() -> None:
    kube_names = {
        "scheduler_schedule_attempts_total",
        "scheduler_scheduling_attempt_duration_seconds",
        "scheduler_pending_pods",
        "scheduler_pod_scheduling_sli_duration_seconds",
        "scheduler_cache_size",  # kube-scheduler's is scheduler_scheduler_cache_size
        "scheduler_preemption_attempts_total",
        "scheduler_preemption_victims",
    }
    ours = {name.replace("plumb_", "scheduler_", 1) for name in metrics.KINDS}
    assert kube_names <= ours
    assert all(name.startswith("plumb_") for name in metrics.KINDS)
    assert set(metrics.KINDS) == set(metrics.LABELS)
    # Base units: durations in seconds, counters end in _total; the one histogram that is no
    # duration counts victims, as kube-scheduler's does.
    for name, kind in metrics.KINDS.items():
        duration = kind == metrics.HISTOGRAM and name != metrics.PREEMPTION_VICTIMS
        assert duration == name.endswith("_seconds"), name
        assert (kind == metrics.COUNTER) == name.endswith("_total"), name


def test_series_lists_what_promql_can_name() -> None:
    assert metrics.SCHEDULE_ATTEMPTS in metrics.SERIES
    assert f"{metrics.ATTEMPT_DURATION}_bucket" in metrics.SERIES
    assert f"{metrics.ATTEMPT_DURATION}_count" in metrics.SERIES
    assert metrics.ATTEMPT_DURATION not in metrics.SERIES  # a histogram has no bare series
    assert metrics.PENDING_PODS in metrics.SERIES


def test_the_recorded_metrics_are_on_the_page_with_their_declared_labels() -> None:
    m = metrics.Metrics()
    for result in metrics.RESULTS:
        m.attempt(result, 0.01)
    m.pod_scheduled(0.1, 3)
    m.kernel_run(0.001)
    for result in metrics.BIND_RESULTS:
        m.binding(result, 0.01)
    m.set_leader(True)
    m.preemption_attempt()
    m.preemption_victims(2)
    m.config_reload(success=True)
    m.config_reload(success=False)
    m.watch_restart("pods")
    m.set_build_info(version="0.1.0", emulated_version="1.37", server_version="v1.37.2")
    m.plugin_execution("DynamicResources", "Filter", "Success", 0.002)
    m.plugin_failure("MaintenanceWindow", "Filter", "timeout")
    m.spans_dropped("queue_full", 3)
    m.podgroup_attempt("scheduled")
    m.podgroup_placed(1.5)
    m.quota_refusal("team-a", metrics.OVER_MAX)
    row = metrics.QuotaRow(
        namespace="team-a", resource="cpu", used=1.5, min=2.0, max=4.0, limit=3.0, attainment=0.9
    )
    m.quotas_from(lambda: [row])
    families = {f.name: f for f in parser.text_string_to_metric_families(m.render().decode())}
    recorded = {
        metrics.SCHEDULE_ATTEMPTS,
        metrics.ATTEMPT_DURATION,
        metrics.SLI_DURATION,
        metrics.KERNEL_DURATION,
        metrics.BINDING_DURATION,
        metrics.LEADER,
        metrics.PREEMPTION_ATTEMPTS,
        metrics.PREEMPTION_VICTIMS,
        metrics.CONFIG_RELOAD_SUCCESSFUL,
        metrics.CONFIG_RELOADS,
        metrics.WATCH_RESTARTS,
        metrics.BUILD_INFO,
        metrics.PLUGIN_EXECUTION,
        metrics.PODGROUP_ATTEMPTS,
        metrics.PODGROUP_DURATION,
        metrics.QUOTA_USED,
        metrics.QUOTA_LIMIT,
        metrics.QUOTA_ATTAINMENT,
        metrics.QUOTA_MIN,
        metrics.QUOTA_MAX,
        metrics.QUOTA_REFUSALS,
        metrics.PLUGIN_FAILURES,
        metrics.SPANS_DROPPED,
    }
    # The parser names a counter's family without _total.
    assert {f if f in metrics.KINDS else f"{f}_total" for f in families} == recorded
    for name in recorded:
        family = families[name.removesuffix("_total")]
        assert family.type == metrics.KINDS[name]
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == set(metrics.LABELS[name]), sample
    attempts = {s.labels["result"]: s.value for s in families["plumb_schedule_attempts"].samples}
    assert attempts == dict.fromkeys(metrics.RESULTS, 1.0)
    assert families[metrics.LEADER].samples[0].value == 1.0
    m.set_leader(False)
    leader = next(
        f for f in parser.text_string_to_metric_families(m.render().decode())
        if f.name == metrics.LEADER
    )  # fmt: skip
    assert leader.samples[0].value == 0.0


def test_preemption_metrics_are_kube_schedulers_with_their_help_and_victim_buckets() -> None:
    assert metrics.VICTIM_BUCKETS == (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
    m = metrics.Metrics()
    page = m.render().decode()
    # On the page from the start, at 0 (rate() works from the first scrape).
    assert (
        "# HELP plumb_preemption_attempts_total Total preemption attempts in the cluster till now\n"
        "# TYPE plumb_preemption_attempts_total counter\n"
        "plumb_preemption_attempts_total 0.0\n"
    ) in page
    assert (
        "# HELP plumb_preemption_victims Number of selected preemption victims\n"
        "# TYPE plumb_preemption_victims histogram\n"
    ) in page
    assert "plumb_preemption_victims_count 0.0\n" in page
    for _ in range(3):
        m.preemption_attempt()  # one each time PostFilter's preemption runs
    for victims in (1, 3, 64, 65):  # only for a chosen candidate
        m.preemption_victims(victims)
    page = m.render().decode()
    assert "\nplumb_preemption_attempts_total 3.0\n" in page
    assert _bucket_bounds(page, metrics.PREEMPTION_VICTIMS) == [
        "1.0", "2.0", "4.0", "8.0", "16.0", "32.0", "64.0", "+Inf",
    ]  # fmt: skip
    families = {f.name: f for f in parser.text_string_to_metric_families(page)}
    buckets = {
        s.labels["le"]: s.value
        for s in families[metrics.PREEMPTION_VICTIMS].samples
        if s.name.endswith("_bucket")
    }
    assert (buckets["1.0"], buckets["2.0"], buckets["4.0"], buckets["64.0"]) == (1, 1, 2, 3)
    assert buckets["+Inf"] == 4  # more than 64: the last bucket only, as kube-scheduler's
    assert "plumb_preemption_victims_sum 133.0\n" in page


def test_a_reader_that_fails_leaves_its_metric_empty_and_the_page_whole() -> None:
    m = metrics.Metrics()

    def broken() -> dict[tuple[str, ...], float]:
        raise RuntimeError("state went away")

    m.gauge_from(metrics.PENDING_PODS, "pending", ("queue",), broken)
    m.counter_from(
        metrics.POLICY_DEVIATIONS, "deviations", ("namespace", "policy"), lambda: {("ns", "p"): 2}
    )
    families = {f.name: f for f in parser.text_string_to_metric_families(m.render().decode())}
    assert families[metrics.PENDING_PODS].samples == []
    deviations = families["plumb_policy_deviations"]
    assert deviations.type == metrics.COUNTER
    assert [(s.name, s.labels, s.value) for s in deviations.samples] == [
        (metrics.POLICY_DEVIATIONS, {"namespace": "ns", "policy": "p"}, 2.0)
    ]


def test_a_refused_reload_sets_the_gauge_to_0_and_a_good_one_back_to_1() -> None:
    m = metrics.Metrics()

    def read() -> dict[str, float]:
        families = parser.text_string_to_metric_families(m.render().decode())
        return {
            f"{s.name}{s.labels.get('result', '')}": s.value
            for f in families
            if f.name.startswith("plumb_config")
            for s in f.samples
        }

    assert read()[metrics.CONFIG_RELOAD_SUCCESSFUL] == 1.0  # no reload tried yet
    m.config_reload(success=False)
    assert read()[metrics.CONFIG_RELOAD_SUCCESSFUL] == 0.0
    assert read()[f"{metrics.CONFIG_RELOADS}failure"] == 1.0
    m.config_reload(success=True)
    assert read()[metrics.CONFIG_RELOAD_SUCCESSFUL] == 1.0
    assert read()[f"{metrics.CONFIG_RELOADS}success"] == 1.0
