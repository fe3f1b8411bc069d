"""An immutable view of the cluster for one scheduling cycle: nodes in name order, as arrays."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

Int64Array = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Snapshot:
    """Nodes sorted by name; row i of every array is node ``names[i]``.

    ``allocatable`` and ``requested`` are (nodes x resources) in the units of
    ``resources`` (cpu in millicores). ``name_hashes`` is a stable 64-bit hash per node name, for
    tie-breaking that does not depend on list order. Arrays are read-only.
    """

    generation: int
    names: tuple[str, ...]
    resources: tuple[str, ...]
    allocatable: Int64Array
    requested: Int64Array
    name_hashes: UInt64Array

    def __len__(self) -> int:
        return len(self.names)
