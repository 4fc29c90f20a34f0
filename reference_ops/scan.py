"""Scans through ATen (CUB's device scan underneath): the cumulative sum along rows.

F counts one add per element. B reads x once and writes y once.
"""

from __future__ import annotations

import torch

from ._registry import reference_op


@reference_op(
    name="cumsum", category="scan",
    input_shapes=lambda s: [(s["rows"], s["cols"])],
    flops=lambda s: 1.0 * s["rows"] * s["cols"],  # one add per element
    bytes_compulsory=lambda s, e: 2.0 * s["rows"] * s["cols"] * e,  # read x, write y
    # KernelBench's 89 scans 32768 x 32768; 4096 rows keep one fp32 tensor at 512 MiB
    default_shape={"rows": 4096, "cols": 32768},
    smoke_shape={"rows": 3, "cols": 50},
    kernelbench_level1=(89,),
)
def cumsum(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=1)
