"""Softmax and log-softmax over the last dim of a ``(rows, cols)`` matrix, through ATen.

F is nominal at 5 per element: the max (a compare), subtract, exp, sum, then a divide (softmax)
or a subtract of the log-sum (log-softmax); the exp counts 1. B reads x once and writes y once.
"""

from __future__ import annotations

import torch

from ._registry import reference_op


@reference_op(
    name="softmax", category="softmax",
    input_shapes=lambda s: [(s["rows"], s["cols"])],
    # max, subtract, exp, sum, divide per element
    flops=lambda s: 5.0 * s["rows"] * s["cols"],
    bytes_compulsory=lambda s, e: 2.0 * s["rows"] * s["cols"] * e,  # read x, write y
    default_shape={"rows": 4096, "cols": 8192},
    smoke_shape={"rows": 4, "cols": 64},
    kernelbench_level1=(23,),
)
def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


@reference_op(
    name="log_softmax", category="softmax",
    input_shapes=lambda s: [(s["rows"], s["cols"])],
    # max, subtract, exp, sum, subtract the log of the sum per element (the log is per row)
    flops=lambda s: 5.0 * s["rows"] * s["cols"],
    bytes_compulsory=lambda s, e: 2.0 * s["rows"] * s["cols"] * e,  # read x, write y
    default_shape={"rows": 4096, "cols": 8192},
    smoke_shape={"rows": 4, "cols": 64},
    kernelbench_level1=(24,),
)
def log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x, dim=-1)
