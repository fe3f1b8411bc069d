"""Preemption: making room for a pod that fits nowhere, in three parts as kube-scheduler has them.

- ``evaluator``: whom to evict and on which node, given each node's pods and a ``fits``
  question; pure computation (kube-scheduler's Evaluator and SelectVictimsOnNode:
  pkg/scheduler/framework/preemption/preemption.go and
  plugins/defaultpreemption/default_preemption.go).
- ``search``: the evaluator fed from the cache, each "does the pod fit without these pods"
  answered by the kernel; read on the event loop, decided on the kernel's thread; no I/O
  (kube-scheduler's DryRunPreemption over its snapshot, in preemption.go).
- ``execution``: the writes that carry a verdict out, the nomination first, then each victim's
  DisruptionTarget condition, deletion and Preempted event (kube-scheduler's Executor,
  preemption/executor.go).

The PostFilter that joins them to the scheduling loop is the scheduler's
(scheduler/postfilter.py), as kube-scheduler keeps its DefaultPreemption plugin outside this
package. docs/preemption.md tells the whole story.
"""
