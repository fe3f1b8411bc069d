"""What the scheduler's parts share: the cache and the queue, the policies, the room held by
nominations, the disruption budgets, the records of bindings whose answer was lost, and where
decisions are reported (the tracer, the event recorder, the metrics).

The ``ClusterFeed`` (scheduler/feed.py) writes what the cluster told us into it; the scheduling
cycle (scheduler/loop.py) and the binding cycle (scheduler/binding.py) write what we decided.
Passing one state to all three, rather than one class inheriting another, shows that seam.
"""

from __future__ import annotations

from plumb import groupconditions
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import nominations as nominations_module
from plumb.events import Recorder
from plumb.extensions import abandoned, calls, extendercalls, hooks, registry
from plumb.framework.schedconfig import plugins as schedconfig_plugins
from plumb.observability import metrics as metrics_module
from plumb.observability import trace, tracing
from plumb.policy import attainment, engine
from plumb.preemption import evaluator
from plumb.scheduler import profiles, rawbodies


class SchedulerState:
    """The records the feed and the two cycles share, each with one home here.

    Written by the feed (pods, nodes, budgets, nominations followed from the status, lost
    bindings the watch shows committed), by the scheduling cycle (assumptions, nominations
    made by preemption, the configuration on a reload) and by the binding cycle (bindings
    confirmed, stepped back from, or left uncertain)."""

    def __init__(
        self,
        *,
        served: profiles.Served,
        cache: cache_module.Cache,
        queue: queue_module.SchedulingQueue,
        policies: engine.PolicyEngine,
        recorder: Recorder,
        tracer: tracing.Tracer,
        metrics: metrics_module.Metrics,
        group_conditions: groupconditions.GroupConditions | None = None,
        extensions: registry.Registry | None = None,
    ) -> None:
        # The configuration in force: pods whose spec.schedulerName names one of its profiles
        # are ours.
        self.served = served
        self.cache = cache
        self.queue = queue
        self.policies = policies
        self.recorder = recorder
        self.tracer = tracer
        self.metrics = metrics
        # The Python plugins the profiles enable, called off the loop and watched (by default
        # those installed).
        found = extensions
        self.extensions = (
            found
            if found is not None
            else registry.installed(frozenset(schedconfig_plugins.registry()))
        )
        # Calls into them left running past their timeout (shared: a count per plugin).
        self.abandoned_calls = abandoned.AbandonedCalls()
        self.plugin_calls = calls.PluginCalls(lambda: self.extensions, self.abandoned_calls)
        self.hooks = hooks.Hooks(lambda: self.extensions, self.abandoned_calls)
        # Where an upstream PodGroup's PodGroupInitiallyScheduled condition is written from
        # (not at all by default: no API).
        self.group_conditions = group_conditions or groupconditions.GroupConditions(
            None, recorder.writes
        )
        # The whole pods and nodes the HTTP extenders are sent (only while they need them).
        self.bodies = rawbodies.RawBodies()
        # Their clients, one per extender, kept across attempts.
        self.extender_calls = extendercalls.ExtenderCalls()
        # Pods nominated by preemption (room held for them), and the PodDisruptionBudgets
        # preemption honours, by (namespace, name).
        self.nominations = nominations_module.Nominations()
        # The SLO-elastic tenants' bound pods and how long each waited (policy/attainment.py).
        self.slo = attainment.SchedulingOutcomes()
        self.budgets: dict[tuple[str, str], evaluator.DisruptionBudget] = {}
        # Bindings whose answer never came (a lost connection, a 5xx, a 409 that may be our
        # own earlier try) for pods being retried: by uid, each try's node and trace line.
        # Should the watch show the pod on one of those nodes, the API server had committed
        # that try, and it is reported as such.
        self.uncertain: dict[str, dict[str, trace.Trace]] = {}
        # Pods reported so (for a try still in flight, whose answer must not report it again).
        self.committed_late: set[str] = set()
