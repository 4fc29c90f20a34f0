"""Reductions through ATen's reduce kernels.

``rowsum`` sums the last dim of a ``(rows, cols)`` matrix (contiguous rows). The others reduce
the middle dim of a ``(batch, dim1, dim2)`` tensor, as KernelBench's Level-1 reductions do, so a
kernel must reduce across strided elements: sum (keepdim, as KernelBench's 47), mean, max, min,
argmax, argmin, product and the L2 norm.

F counts one operation per input element (an add, a compare; the L2 norm counts 2: square and
add); per-output work (mean's divide, the norm's square root) is ignored. B reads the input once
and writes one value per output position: in the input's dtype, except argmax and argmin, whose
int64 indices are 8 bytes each.

argmax and argmin return int64 indices; the gate compares integer outputs exactly (an index off
by one fails), and ties resolve to the first index in PyTorch and in the fp64 reference alike.
In fp16 and bf16, ties are common: a candidate must return the first maximal index too.

The product keeps its factors near 1: each drawn value ``x`` becomes ``1 + x / dim1``, so the
product of ``dim1`` factors stays within about ``exp(+-mean|x|)`` for every distribution, the
signs and the shape of the distribution survive, and nothing overflows or vanishes. This needs
fp32: in fp16 or bf16 the factors round to 1 at a long ``dim1``, so ``prod`` lists fp32 only.
"""

from __future__ import annotations

import torch

from ._registry import reference_op

# (batch, dim1, dim2): KernelBench's reductions use (128, 4096, 4095); 16 batches keep one fp32
# tensor at 1 GiB.
REDUCE_DEFAULT = {"batch": 16, "dim1": 4096, "dim2": 4095}
REDUCE_SMOKE = {"batch": 2, "dim1": 16, "dim2": 7}


def _in(s) -> float:
    return 1.0 * s["batch"] * s["dim1"] * s["dim2"]


def _out(s) -> float:
    return 1.0 * s["batch"] * s["dim2"]


def _reduce_op(name: str, kernelbench: tuple[int, ...], **extra):
    """The decorator for a (batch, dim1, dim2) -> (batch, dim2) reduction in the input's dtype."""
    spec = dict(
        name=name, category="reduction",
        input_shapes=lambda s: [(s["batch"], s["dim1"], s["dim2"])],
        flops=_in,  # one add or compare per input element
        bytes_compulsory=lambda s, e: (_in(s) + _out(s)) * e,  # read x, write one value per (batch, dim2)
        default_shape=dict(REDUCE_DEFAULT), smoke_shape=dict(REDUCE_SMOKE),
        kernelbench_level1=kernelbench,
    )
    spec.update(extra)
    return reference_op(**spec)


@reference_op(
    name="rowsum", category="reduction",
    input_shapes=lambda s: [(s["rows"], s["cols"])],
    flops=lambda s: 1.0 * s["rows"] * s["cols"],  # one add per element
    # read the matrix, write one value per row
    bytes_compulsory=lambda s, e: (1.0 * s["rows"] * s["cols"] + s["rows"]) * e,
    default_shape={"rows": 4096, "cols": 8192},
    smoke_shape={"rows": 5, "cols": 48},
    # KernelBench's 47 sums the middle dim of a 3-D tensor: see ``sum``
)
def rowsum(x: torch.Tensor) -> torch.Tensor:
    return torch.sum(x, dim=-1)


@_reduce_op("sum", (47,))
def sum_dim1(x: torch.Tensor) -> torch.Tensor:
    """Sum over dim 1, keeping it: ``(batch, dim1, dim2) -> (batch, 1, dim2)``."""
    return torch.sum(x, dim=1, keepdim=True)


@_reduce_op("mean", (48,))
def mean_dim1(x: torch.Tensor) -> torch.Tensor:
    return torch.mean(x, dim=1)


@_reduce_op("max", (49,))
def max_dim1(x: torch.Tensor) -> torch.Tensor:
    """The maximal values over dim 1 (not the indices)."""
    return torch.amax(x, dim=1)


@_reduce_op("min", (53,))
def min_dim1(x: torch.Tensor) -> torch.Tensor:
    """The minimal values over dim 1 (not the indices)."""
    return torch.amin(x, dim=1)


@_reduce_op("argmax", (51,),
            # read x in its dtype, write one int64 index per (batch, dim2)
            bytes_compulsory=lambda s, e: _in(s) * e + _out(s) * 8)
def argmax_dim1(x: torch.Tensor) -> torch.Tensor:
    return torch.argmax(x, dim=1)


@_reduce_op("argmin", (52,),
            # read x in its dtype, write one int64 index per (batch, dim2)
            bytes_compulsory=lambda s, e: _in(s) * e + _out(s) * 8)
def argmin_dim1(x: torch.Tensor) -> torch.Tensor:
    return torch.argmin(x, dim=1)


def _near_one(inputs: list[torch.Tensor], s: dict[str, int]) -> list[torch.Tensor]:
    """``x -> 1 + z / dim1``, z the draw standardized when its spread is far from 1 (the wide-scale
    and large-offset draws: otherwise the product of 4096 factors overflows or stays 1), computed in
    fp32 and stored in the input's dtype."""
    out = []
    for x in inputs:
        z = x.float()
        mean, std = float(z.mean()), float(z.std()) if z.numel() > 1 else 1.0
        if abs(mean) > 40 or not 0.1 < std < 40:
            z = (z - mean) / (std if std > 0 else 1.0)
        out.append((1.0 + z / s["dim1"]).to(x.dtype))
    return out


@_reduce_op("prod", (),  # KernelBench replaced its product reduction (old 50) by a convolution
            input_transform=_near_one)
def prod_dim1(x: torch.Tensor) -> torch.Tensor:
    return torch.prod(x, dim=1)


@_reduce_op("l2norm", (),  # KernelBench's 39_L2Norm_ divides by the norm: see ``l2_normalize``
            flops=lambda s: 2.0 * _in(s))  # square and add per element
def l2norm_dim1(x: torch.Tensor) -> torch.Tensor:
    """The Euclidean norm over dim 1."""
    return torch.linalg.vector_norm(x, ord=2, dim=1)
