"""ImageLocality: nodes that already hold the pod's container images score higher (score,
weight 1; no filter, no normalisation).

kube-scheduler's plugin (plugins/imagelocality/image_locality.go), per node:

- each container's image (init containers included), and from v1.36 each image volume's
  (spec.volumes[].image.reference), normalised with ":latest" when it has no tag
  (objects.normalized_image), is looked up among the names of the node's status.images;
- an image found adds its size scaled by the share of all nodes holding that name:
  ``int(size * (nodes holding it / all nodes))`` in float64, which spreads pods of a popular
  image instead of heating the few nodes that pulled it first;
- the sum is clamped to [23 MiB, 1000 MiB * the number of images] and mapped linearly onto
  0-100 with Go's integer arithmetic: ``100 * (sum - 23 MiB) // (max - 23 MiB)``. The images
  counted are the containers' (v1.34 to v1.36: an image volume held raises the sum, not the
  bound, #130231), and from v1.37 every image volume's too, held or not (#138951).

``Emulation.image_volumes`` says which: 0 volumes ignored, 1 in the sum, 2 in the bound too.

The names must match exactly as strings: "nginx" in a pod (normalised "nginx:latest") does not
match "docker.io/library/nginx:latest" in a node's status, as in kube-scheduler.
"""

from __future__ import annotations

import numpy as np

from plumb.backend.cache import snapshot
from plumb.backend.records import objects

NAME = "ImageLocality"
SCORE_WEIGHT = 1
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def scaled_size(size: int, holders: int, nodes: int) -> int:
    """An image's contribution: its size times the share of nodes holding it (float64, then
    truncated, as Go's int64(float64(size) * spread))."""
    spread = float(holders) / float(nodes)
    return int(float(size) * spread)


def priority(total: int, containers: int) -> int:
    """The 0-100 score of a node whose held images add up to ``total`` for a pod of
    ``containers`` containers (kube-scheduler's calculatePriority)."""
    high = MAX_CONTAINER_THRESHOLD * containers
    if total < MIN_THRESHOLD:
        total = MIN_THRESHOLD
    elif total > high:
        total = high
    return _go_div(100 * (total - MIN_THRESHOLD), high - MIN_THRESHOLD)


def _go_div(x: int, y: int) -> int:
    """Go's int64 division (truncates towards zero)."""
    quotient = abs(x) // abs(y)
    return quotient if (x >= 0) == (y > 0) else -quotient


def counted(pod: objects.PodInfo, image_volumes: int) -> tuple[tuple[str, ...], int]:
    """The images whose sizes add up on a node, and how many images set the upper bound, as
    the release (``Emulation.image_volumes``) counts them."""
    summed = pod.images + pod.image_volumes if image_volumes >= 1 else pod.images
    bound = len(pod.images) + (len(pod.image_volumes) if image_volumes >= 2 else 0)
    return summed, bound


def score(
    pod: objects.PodInfo, statics: snapshot.NodeStatics, image_volumes: int
) -> snapshot.Int64Array:
    """ImageLocality's score of every node for ``pod``, 0-100, as the release counts image
    volumes (``Emulation.image_volumes``)."""
    nodes = len(statics)
    totals = np.zeros(nodes, dtype=np.int64)
    images, bound = counted(pod, image_volumes)
    if not nodes or not images or not bound:
        return totals
    held = statics.images
    for image in images:
        found = held.get(image)
        if found is not None:
            size, where = found
            totals[where] += scaled_size(size, int(where.shape[0]), nodes)
    # priority() over every node at once: the clamped sums are never negative, so numpy's
    # floor division is Go's.
    high = MAX_CONTAINER_THRESHOLD * bound
    clamped = np.clip(totals, MIN_THRESHOLD, high)
    scores: snapshot.Int64Array = 100 * (clamped - MIN_THRESHOLD) // (high - MIN_THRESHOLD)
    return scores
