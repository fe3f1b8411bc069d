"""Compact trace records: the per-plugin scores a kept trace holds are a tuple over a shared
plugin-name tuple, not a dict per candidate, and a scheduled pod's empty rejections one shared
mapping; both read, compare, hash and write exactly as the dicts they replace."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import pickle
import sys

import pytest

from plumb.framework import cycle, scoring, traces
from plumb.kernel import contract
from plumb.observability import logs, trace, tracing
from plumb_dev.testing.builders import make_pod
from tests.support import small_clusters

VALUES = (88, 61, 100, 0, 42, 0, 7, 3, 95, 50)


def _as_dict() -> dict[str, int]:
    return dict(zip(contract.SCORE_PLUGINS, VALUES, strict=True))


def test_scores_read_and_compare_as_the_dict_they_stand_for() -> None:
    scores = trace.Scores(contract.SCORE_PLUGINS, VALUES)
    plain = _as_dict()
    assert scores == plain
    assert plain == scores
    assert dict(scores) == plain
    assert list(scores) == list(plain)
    assert list(scores.items()) == list(plain.items())
    assert len(scores) == len(plain)
    assert repr(scores) == repr(plain)
    assert scores["PodTopologySpread"] == 42
    assert scores.get("nope", "-") == "-"
    assert "ZoneHealth" in scores
    assert "nope" not in scores
    with pytest.raises(KeyError):
        scores["nope"]
    assert scores != {**plain, "NodeResourcesFit": 1}
    assert copy.deepcopy(scores) == plain
    assert pickle.loads(pickle.dumps(scores)) == plain


def test_scores_shorter_than_the_names_keep_the_first_names() -> None:
    # zip(..., strict=False) did the same for a kernel giving fewer scores than plugins.
    scores = trace.Scores(contract.SCORE_PLUGINS, (1, 2))
    assert scores == {contract.SCORE_PLUGINS[0]: 1, contract.SCORE_PLUGINS[1]: 2}


def test_scores_outside_a_byte_keep_their_values() -> None:
    scores = trace.Scores(("a", "b", "c"), (300, -1, 2**70))
    assert scores == {"a": 300, "b": -1, "c": 2**70}
    assert scores["c"] == 2**70


def test_scores_take_less_room_than_a_dict() -> None:
    assert sys.getsizeof(trace.Scores(contract.SCORE_PLUGINS, VALUES)) < sys.getsizeof(_as_dict())
    assert not hasattr(trace.Scores(contract.SCORE_PLUGINS, VALUES), "__dict__")


def _record(scores: object) -> trace.Trace:
    candidate = trace.CandidateRecord(node="node-a", score=612, scores=scores)  # type: ignore[arg-type]
    return trace.Trace(
        pod="default/web-0",
        uid="u-1",
        result=trace.SCHEDULED,
        node="node-a",
        candidates=(candidate,),
        weights=dict.fromkeys(contract.SCORE_PLUGINS, 1),
        plan_hash=trace.plan_hash("u-1", "node-a", (candidate,)),
    )


def test_a_trace_with_compact_scores_writes_the_same_bytes_and_hashes() -> None:
    compact = _record(trace.Scores(contract.SCORE_PLUGINS, VALUES))
    plain = _record(_as_dict())
    assert compact == plain
    assert compact.plan_hash == plain.plan_hash
    assert trace.canonical(compact.candidates[0]) == trace.canonical(plain.candidates[0])
    assert json.dumps(compact.fields()) == json.dumps(plain.fields())
    for formatter in (logs.JsonFormatter(), logs.PlainFormatter()):
        lines = [_line(formatter, record) for record in (compact, plain)]
        assert lines[0] == lines[1]
    assert trace.Trace.from_fields(json.loads(json.dumps(compact.fields()))) == compact


def test_the_traces_built_hold_compact_scores_and_a_shared_empty_rejection() -> None:
    pod = small_clusters.pod(make_pod("web-0"), "u-1")
    decision = cycle.Decision(
        pod=pod,
        node="node-a",
        feasible=3,
        total=3,
        candidates=(cycle.ScoredNode(node="node-a", total=612, scores=VALUES),),
    )
    built = traces.rejections(decision, {})
    assert built == {}
    assert built is traces.rejections(decision, {})
    prepared = cycle.Prepared(early=[decision], compiled=None)
    hashed = traces.hashes([decision], prepared, 7, 3, scoring.DEFAULT, None)
    (candidate,), _inputs, plan = hashed["u-1"]
    assert isinstance(candidate.scores, trace.Scores)
    assert candidate.scores == _as_dict()
    plain = trace.CandidateRecord(node="node-a", score=612, scores=_as_dict())
    assert candidate == plain
    assert plan == trace.plan_hash("u-1", "node-a", (plain,))


def _line(formatter: logging.Formatter, record: trace.Trace) -> str:
    entry = logging.LogRecord(trace.LOGGER, logging.INFO, __file__, 1, record.summary(), (), None)
    entry.created = entry.msecs = 0.0
    setattr(entry, logs.FIELDS, record.fields())
    return formatter.format(entry)


def test_the_tracer_counts_attempts_held_back_without_an_entry_per_pod() -> None:
    now = [0.0]
    log = logging.Logger("memory-data")
    log.disabled = True
    tracer = tracing.Tracer(clock=lambda: now[0], log=log)
    failed = trace.Trace(
        pod="ns/web", uid="u-1", result=trace.UNSCHEDULABLE, message="0/3 nodes", attempts=1
    )
    assert tracer.tried("ns/web") is None
    assert tracer.emit(failed, repeat_after=10.0)
    assert tracer.tried("ns/web") == 1
    now[0] = 1.0
    again = dataclasses.replace(failed, attempts=2)
    assert not tracer.emit(again, repeat_after=10.0)  # the same answer: held back
    record = tracer.last("ns/web")
    assert record is not None
    assert record.attempts == 1
    assert tracer.tried("ns/web") == 2
    bound = trace.Trace(pod="ns/web", uid="u-1", result=trace.SCHEDULED, node="n", attempts=3)
    assert tracer.emit(bound)
    assert tracer.tried("ns/web") == 3
    tracer.forget("ns/web", "u-1")
    assert tracer.tried("ns/web") is None
    assert tracer.last("ns/web") is None
