"""Elementwise ops and activations through ATen: ReLU, GELU (erf and tanh forms), SiLU, tanh,
sigmoid, and add and mul with a broadcast operand.

These are memory-bound: F is nominal and never sets the floor. Counted per element, with a
transcendental (exp, erf, tanh) as 1: ReLU 1 (a max); sigmoid 3 (exp, add, divide; the negation
is free); tanh 1; SiLU 4 (sigmoid and a multiply); GELU 5 (scale by 1/sqrt(2), erf, add 1,
multiply by x, multiply by 0.5); GELU-tanh 9 (x^3 as 2 multiplies, scale, add x, scale, tanh, add
1, multiply by x, multiply by 0.5); add and mul 1. B reads every input once (a broadcast operand
at its own size) and writes the output once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._registry import reference_op

ELEMENTWISE_DEFAULT = {"rows": 4096, "cols": 16384}
"""67M elements (KernelBench's activations use 4096 x 393216; this keeps one fp32 tensor at 256 MiB)."""
ELEMENTWISE_SMOKE = {"rows": 4, "cols": 40}


def _n(s) -> float:
    return 1.0 * s["rows"] * s["cols"]


def _unary(name: str, flops_per_element: float, kernelbench: tuple[int, ...]):
    """The decorator for a unary (rows, cols) -> (rows, cols) op."""
    return reference_op(
        name=name, category="elementwise",
        input_shapes=lambda s: [(s["rows"], s["cols"])],
        flops=lambda s: flops_per_element * _n(s),
        bytes_compulsory=lambda s, e: 2.0 * _n(s) * e,  # read x, write y
        default_shape=dict(ELEMENTWISE_DEFAULT), smoke_shape=dict(ELEMENTWISE_SMOKE),
        kernelbench_level1=kernelbench,
    )


@_unary("relu", 1.0, (19,))  # max(x, 0)
def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


@_unary("sigmoid", 3.0, (21,))  # exp(-x), add 1, divide
def sigmoid(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x)


@_unary("tanh", 1.0, (22,))  # one transcendental
def tanh(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x)


@_unary("silu", 4.0, (25,))  # sigmoid (3) and a multiply; KernelBench's Swish is x * sigmoid(x)
def silu(x: torch.Tensor) -> torch.Tensor:
    return F.silu(x)


@_unary("gelu", 5.0, (26,))  # scale, erf, add 1, multiply by x, multiply by 0.5
def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, exact (erf) form: PyTorch's default."""
    return F.gelu(x)


@_unary("gelu_tanh", 9.0, (88,))  # x^3 (2), scale, add x, scale, tanh, add 1, multiply by x, by 0.5
def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh approximation: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (minGPT's NewGELU)."""
    return F.gelu(x, approximate="tanh")


@reference_op(
    name="add_broadcast", category="elementwise",
    input_shapes=lambda s: [(s["rows"], s["cols"]), (s["cols"],)],
    flops=lambda s: _n(s),  # one add per output element
    # read x, read the row vector once, write y
    bytes_compulsory=lambda s, e: (2.0 * _n(s) + s["cols"]) * e,
    default_shape=dict(ELEMENTWISE_DEFAULT), smoke_shape=dict(ELEMENTWISE_SMOKE),
)
def add_broadcast(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` with ``y`` a row vector broadcast over the rows."""
    return torch.add(x, y)


@reference_op(
    name="mul_broadcast", category="elementwise",
    input_shapes=lambda s: [(s["rows"], s["cols"]), (s["rows"], 1)],
    flops=lambda s: _n(s),  # one multiply per output element
    # read x, read the column vector once, write y
    bytes_compulsory=lambda s, e: (2.0 * _n(s) + s["rows"]) * e,
    default_shape=dict(ELEMENTWISE_DEFAULT), smoke_shape=dict(ELEMENTWISE_SMOKE),
)
def mul_broadcast(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x * y`` with ``y`` a column (one scale per row) broadcast over the columns."""
    return torch.mul(x, y)
