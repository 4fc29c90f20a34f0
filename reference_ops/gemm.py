"""GEMM through cuBLAS: square, tall-skinny, batched, linear with bias, and TF32.

F counts a multiply-add as 2: ``2*M*N*K`` per product (+ ``M*N`` for a bias add). B reads each
operand once and writes the output once.

How TF32 is represented. A dtype is per problem (``Problem.op("matmul", dtype="bfloat16")``);
TF32 is a math mode, not a dtype. An fp32 problem is strict fp32: its reference runs with
PyTorch's default ``torch.backends.cuda.matmul.allow_tf32 = False`` and a candidate that rounds
its inputs to TF32 fails numerics (a precision downgrade). Its physics floor (``peak_mode``) still
uses the TF32 peak, because nothing faster than TF32 tensor cores can compute it. A TF32 GEMM is
its own entry, ``matmul_tf32``: the reference turns TF32 on for its own call and restores the
flag, its math mode in fp32 is TF32 (so U is measured against the TF32 peak), and its tolerance
admits TF32's 10-bit mantissa.
"""

from __future__ import annotations

import torch

from kernelgate.numerics import Tolerance

from ._registry import reference_op

GEMM_DTYPES = ("float32", "float16", "bfloat16")

TF32_TOLERANCE = Tolerance(atol=5e-3, rtol=5e-3)
"""TF32 rounds each operand to a 10-bit mantissa (relative error up to 2**-11, about 4.9e-4 per
product); summed over K the output error is a few 1e-4 of its rms. 5e-3 leaves a margin of ten
and stays below the fp16 tolerance (1e-2)."""


def _mm_input_shapes(s):
    """A (m x k), B (k x n)."""
    return [(s["m"], s["k"]), (s["k"], s["n"])]


def _mm_flops(s):
    """One multiply-add per (i, j, l): 2*M*N*K."""
    return 2.0 * s["m"] * s["n"] * s["k"]


def _mm_bytes(s, e):
    """Read A (m x k) and B (k x n), write C (m x n); fp32 storage for TF32 too (it changes the math)."""
    return (1.0 * s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"]) * e


@reference_op(
    name="matmul", category="gemm",
    input_shapes=_mm_input_shapes,
    flops=_mm_flops,
    bytes_compulsory=_mm_bytes,
    default_shape={"m": 4096, "n": 4096, "k": 4096},
    smoke_shape={"m": 32, "n": 24, "k": 16},
    dtypes=GEMM_DTYPES,
    matmul_like=True,
    kernelbench_level1=(1, 2, 6, 7, 8),  # square, standard, large K, small K, irregular: all 2-D A @ B
)
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)


@reference_op(
    name="matmul_tall_skinny", category="gemm",
    input_shapes=_mm_input_shapes,
    flops=_mm_flops,
    bytes_compulsory=_mm_bytes,  # at the default shape reading A dominates
    default_shape={"m": 32768, "n": 16, "k": 4096},
    smoke_shape={"m": 64, "n": 2, "k": 16},
    dtypes=GEMM_DTYPES,
    matmul_like=True,
    kernelbench_level1=(4, 9),  # matrix-vector (n = 1); tall-skinny A with a small inner dimension
)
def matmul_tall_skinny(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A @ B with one operand tall and skinny (here a few output columns): memory-bound on A."""
    return torch.matmul(a, b)


@reference_op(
    name="bmm", category="gemm",
    input_shapes=lambda s: [(s["batch"], s["m"], s["k"]), (s["batch"], s["k"], s["n"])],
    flops=lambda s: 2.0 * s["batch"] * s["m"] * s["n"] * s["k"],  # 2*M*N*K per batch entry
    # read A (b x m x k) and B (b x k x n), write C (b x m x n)
    bytes_compulsory=lambda s, e: s["batch"] * (1.0 * s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"]) * e,
    default_shape={"batch": 128, "m": 512, "n": 2048, "k": 1024},
    smoke_shape={"batch": 3, "m": 8, "n": 12, "k": 16},
    dtypes=GEMM_DTYPES,
    matmul_like=True,
    kernelbench_level1=(3,),
)
def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a, b)


@reference_op(
    name="linear", category="gemm",
    input_shapes=lambda s: [(s["batch"], s["in_features"]), (s["out_features"], s["in_features"]),
                            (s["out_features"],)],
    # x @ W^T: 2*batch*out*in; the bias: one add per output element
    flops=lambda s: 2.0 * s["batch"] * s["out_features"] * s["in_features"] + 1.0 * s["batch"] * s["out_features"],
    # read x (batch x in), W (out x in), b (out); write y (batch x out)
    bytes_compulsory=lambda s, e: (1.0 * s["batch"] * s["in_features"] + s["out_features"] * s["in_features"]
                                   + s["out_features"] + s["batch"] * s["out_features"]) * e,
    default_shape={"batch": 4096, "in_features": 4096, "out_features": 4096},
    smoke_shape={"batch": 16, "in_features": 32, "out_features": 24},
    dtypes=GEMM_DTYPES,
    matmul_like=True,
)
def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T + bias`` (cuBLAS GEMM with the bias in its epilogue)."""
    return torch.nn.functional.linear(x, weight, bias)


@reference_op(
    name="matmul_tf32", category="gemm",
    input_shapes=_mm_input_shapes,
    flops=_mm_flops,
    bytes_compulsory=_mm_bytes,
    default_shape={"m": 4096, "n": 4096, "k": 4096},
    smoke_shape={"m": 32, "n": 24, "k": 16},
    dtypes=("float32",),
    matmul_like=True,
    tf32=True,
    tolerance={"float32": TF32_TOLERANCE},
)
def matmul_tf32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A @ B with TF32 tensor cores allowed for this call only (the flag is restored after it)."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
