"""The library side of every comparison: reference ops with their inputs and their cost model.

Each op is registered next to its definition with ``@reference_op``; it says how to draw its
inputs, which library call is the reference, and how many FLOPs and compulsory bytes one call
costs (each input read once, each output written once). Candidates for a catalogue op are
functions (or argument-less ``ModelNew`` modules) called with the same inputs as the reference.

Shapes are named parameters with defaults (``rows``, ``cols``...) that callers override.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from kernelgate.hardware import MathMode

__all__ = ["ReferenceOp", "reference_op", "get_op", "list_ops", "DTYPES"]

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class ReferenceOp:
    """One catalogue entry."""

    name: str
    category: str
    reference: Callable[..., torch.Tensor]
    """The library call (cuBLAS, cuDNN, ATen through PyTorch)."""
    input_shapes: Callable[[dict[str, int]], list[tuple[int, ...]]]
    """Shapes of the inputs, in call order, from the shape parameters."""
    flops: Callable[[dict[str, int]], float]
    bytes_compulsory: Callable[[dict[str, int], int], float]
    """From the shape parameters and the element size in bytes."""
    default_shape: dict[str, int]
    default_dtype: str = "float32"
    matmul_like: bool = False
    """Runs on tensor cores when allowed: an fp32 problem's physics floor uses the TF32 peak."""
    kernelbench_level1: tuple[int, ...] = ()
    """KernelBench Level-1 problem ids this op matches."""
    positive_inputs: tuple[int, ...] = field(default=())
    """Indices of inputs that must stay positive (none of the current ops)."""

    def shape(self, overrides: dict[str, int] | None = None) -> dict[str, int]:
        unknown = set(overrides or {}) - set(self.default_shape)
        if unknown:
            raise KeyError(f"{self.name} has no shape parameter {', '.join(sorted(unknown))}; "
                           f"it has {', '.join(self.default_shape)}")
        return {**self.default_shape, **(overrides or {})}

    def math_mode(self, dtype: str) -> MathMode:
        return {"float32": MathMode.fp32, "float16": MathMode.fp16, "bfloat16": MathMode.bf16}[dtype]

    def peak_mode(self, dtype: str) -> MathMode:
        if dtype == "float32" and self.matmul_like:
            return MathMode.tf32
        return self.math_mode(dtype)


_OPS: dict[str, ReferenceOp] = {}


def reference_op(**spec) -> Callable[[Callable], Callable]:
    """Register the decorated library call as a reference op described by ``spec``."""

    def wrap(fn: Callable) -> Callable:
        op = ReferenceOp(name=spec.pop("name"), reference=fn, **spec)
        if op.name in _OPS:
            raise ValueError(f"reference op {op.name!r} registered twice")
        _OPS[op.name] = op
        return fn

    return wrap


def get_op(name: str) -> ReferenceOp:
    if name not in _OPS:
        raise KeyError(f"unknown reference op {name!r}; known: {', '.join(sorted(_OPS))}")
    return _OPS[name]


def list_ops() -> list[ReferenceOp]:
    return [ _OPS[k] for k in sorted(_OPS) ]


# --- normalization -------------------------------------------------------------------------


@reference_op(
    name="layernorm", category="normalization",
    input_shapes=lambda s: [(s["rows"], s["cols"]), (s["cols"],), (s["cols"],)],
    # per element: subtract mean, square, accumulate, scale, shift (mean and var reductions included)
    flops=lambda s: 5.0 * s["rows"] * s["cols"],
    # read x, write y, read weight and bias once
    bytes_compulsory=lambda s, e: (2.0 * s["rows"] * s["cols"] + 2.0 * s["cols"]) * e,
    default_shape={"rows": 4096, "cols": 4096},
    kernelbench_level1=(40,),
)
def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


# --- reductions and softmax ----------------------------------------------------------------


@reference_op(
    name="softmax", category="softmax",
    input_shapes=lambda s: [(s["rows"], s["cols"])],
    # max, subtract, exp, sum, divide per element
    flops=lambda s: 5.0 * s["rows"] * s["cols"],
    bytes_compulsory=lambda s, e: 2.0 * s["rows"] * s["cols"] * e,
    default_shape={"rows": 4096, "cols": 8192},
    kernelbench_level1=(23,),
)
def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


@reference_op(
    name="rowsum", category="reduction",
    input_shapes=lambda s: [(s["rows"], s["cols"])],
    flops=lambda s: 1.0 * s["rows"] * s["cols"],
    # read the matrix, write one value per row
    bytes_compulsory=lambda s, e: (1.0 * s["rows"] * s["cols"] + s["rows"]) * e,
    default_shape={"rows": 4096, "cols": 8192},
    kernelbench_level1=(47,),
)
def rowsum(x: torch.Tensor) -> torch.Tensor:
    return torch.sum(x, dim=-1)


# --- GEMM ----------------------------------------------------------------------------------


@reference_op(
    name="matmul", category="gemm",
    input_shapes=lambda s: [(s["m"], s["k"]), (s["k"], s["n"])],
    flops=lambda s: 2.0 * s["m"] * s["n"] * s["k"],
    bytes_compulsory=lambda s, e: (1.0 * s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"]) * e,
    default_shape={"m": 4096, "n": 4096, "k": 4096},
    matmul_like=True,
    kernelbench_level1=(1,),
)
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)
