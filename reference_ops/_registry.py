"""The registry: ``ReferenceOp``, the ``@reference_op`` decorator, ``get_op`` and ``list_ops``.

The category modules (``gemm``, ``conv``, ``norm``, ...) register their ops with the decorator
when ``kernelgate.reference_ops`` imports them; this module holds no op itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from kernelgate.hardware import MathMode
from kernelgate.numerics import Tolerance

__all__ = ["ReferenceOp", "reference_op", "get_op", "list_ops", "DTYPES", "conv_out", "conv_transpose_out"]

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

_MODES = {"float32": MathMode.fp32, "float16": MathMode.fp16, "bfloat16": MathMode.bf16}

Shape = dict[str, int]


@dataclass(frozen=True)
class ReferenceOp:
    """One catalogue entry: the library call, how to draw its inputs, and what one call costs."""

    name: str
    category: str
    reference: Callable[..., torch.Tensor]
    """The library call (cuBLAS, cuDNN, ATen through PyTorch), called with the inputs in order."""
    input_shapes: Callable[[Shape], list[tuple[int, ...]]]
    """Shapes of the inputs, in call order, from the shape parameters (weights and biases included)."""
    flops: Callable[[Shape], float]
    """Algorithmic FLOPs of one call (a multiply-add counts 2)."""
    bytes_compulsory: Callable[[Shape, int], float]
    """From the shape parameters and the element size of the problem's dtype in bytes: each input
    read once, each output written once (integer outputs at their own size, e.g. int64 at 8)."""
    default_shape: Shape
    """A realistic, KernelBench-Level-1-like shape (sized for an H200's memory)."""
    smoke_shape: Shape | None = None
    """A tiny shape for CPU smoke runs (``benchmarks/library_ops.py --smoke``); None: the default."""
    default_dtype: str = "float32"
    dtypes: tuple[str, ...] = ("float32",)
    """The dtypes the op is meant for; the library benchmark times each of them."""
    matmul_like: bool = False
    """Runs on tensor cores when allowed: an fp32 problem's physics floor uses the TF32 peak."""
    tf32: bool = False
    """The reference itself computes fp32 inputs in TF32: the math mode of its fp32 problem is TF32."""
    kernelbench_level1: tuple[int, ...] = ()
    """KernelBench Level-1 problem ids this op computes (at other shapes), as numbered in
    ScalingIntelligence/KernelBench's ``KernelBench/level1`` (2026-03, commit 423217d)."""
    positive_inputs: tuple[int, ...] = field(default=())
    """Indices of inputs that must stay positive (variances): drawn values map to ``|x| + 0.5``."""
    input_transform: Callable[[list[torch.Tensor], Shape], list[torch.Tensor]] | None = None
    """Maps the drawn inputs to the op's domain, keeping each distribution's shape (product
    reductions keep their factors near 1 so the product neither overflows nor vanishes)."""
    tolerance: Mapping[str, Tolerance] | None = None
    """Numerics tolerance per dtype name; a dtype not listed (or None) takes the gate's default
    (``kernelgate.numerics.TOLERANCES``)."""

    def shape(self, overrides: dict[str, int] | None = None) -> Shape:
        unknown = set(overrides or {}) - set(self.default_shape)
        if unknown:
            raise KeyError(f"{self.name} has no shape parameter {', '.join(sorted(unknown))}; "
                           f"it has {', '.join(self.default_shape)}")
        return {**self.default_shape, **(overrides or {})}

    def math_mode(self, dtype: str) -> MathMode:
        """The math mode the library computes this dtype in (TF32 only for ``tf32`` ops in fp32)."""
        if dtype == "float32" and self.tf32:
            return MathMode.tf32
        return _MODES[dtype]

    def peak_mode(self, dtype: str) -> MathMode:
        """The fastest mode the dtype allows: the physics floor (TF32 for fp32 matmul-like ops)."""
        if dtype == "float32" and self.matmul_like:
            return MathMode.tf32
        return self.math_mode(dtype)

    def tolerance_for(self, dtype: str) -> Tolerance | None:
        """This op's numerics tolerance in ``dtype``, or None for the gate's default."""
        return (self.tolerance or {}).get(dtype)

    def make_inputs(self, shape: Shape, dtype: torch.dtype, distribution: str, gen: torch.Generator,
                    device: torch.device | str = "cpu") -> list[torch.Tensor]:
        """Fresh inputs drawn from one of ``kernelgate.problems.DISTRIBUTIONS`` with ``gen``."""
        from kernelgate.problems import draw

        inputs = [draw(s, dtype, distribution, gen, torch.device(device)) for s in self.input_shapes(shape)]
        for index in self.positive_inputs:
            inputs[index] = (inputs[index].float().abs() + 0.5).to(dtype)
        if self.input_transform is not None:
            inputs = list(self.input_transform(inputs, shape))
        return inputs

    def example_inputs(self, shape: Shape | None = None, dtype: str = "float32", distribution: str = "normal",
                       seed: int = 0, device: torch.device | str = "cpu") -> list[torch.Tensor]:
        """Seeded inputs at ``shape`` (default: the op's default shape)."""
        gen = torch.Generator(device=torch.device(device)).manual_seed(seed)
        return self.make_inputs(shape if shape is not None else self.shape(), DTYPES[dtype], distribution, gen,
                                device)


_OPS: dict[str, ReferenceOp] = {}


def reference_op(**spec) -> Callable[[Callable], Callable]:
    """Register the decorated library call as a reference op described by ``spec``."""

    def wrap(fn: Callable) -> Callable:
        op = ReferenceOp(name=spec.pop("name"), reference=fn, **spec)
        if op.name in _OPS:
            raise ValueError(f"reference op {op.name!r} registered twice")
        bad = [d for d in (op.default_dtype, *op.dtypes) if d not in DTYPES]
        if bad:
            raise ValueError(f"reference op {op.name!r}: unknown dtype {bad[0]!r}; known: {', '.join(DTYPES)}")
        if op.smoke_shape is not None:
            op.shape(op.smoke_shape)  # a smoke shape names only real parameters
        _OPS[op.name] = op
        return fn

    return wrap


def get_op(name: str) -> ReferenceOp:
    if name not in _OPS:
        raise KeyError(f"unknown reference op {name!r}; known: {', '.join(sorted(_OPS))}")
    return _OPS[name]


def list_ops() -> list[ReferenceOp]:
    return [_OPS[k] for k in sorted(_OPS)]


def conv_out(size: int, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    """Output length of a convolution along one dimension (PyTorch's formula)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_transpose_out(size: int, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1,
                       output_padding: int = 0) -> int:
    """Output length of a transposed convolution along one dimension (PyTorch's formula)."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
