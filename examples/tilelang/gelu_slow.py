"""GELU candidate in TileLang (deliberately slow): exact erf GELU evaluated in fp64.

For the catalogue op ``gelu`` (fp32, rows=4096 x cols=16384 by default):
y = 0.5 * x * (1 + erf(x / sqrt(2))), the exact form that
``torch.nn.functional.gelu`` computes by default.

Design: the input is viewed as one flat vector of n = rows * cols elements.
Each CTA has 64 threads and owns 64 consecutive elements, one per thread;
a thread loads its element, widens it to float64, evaluates erf and the
products in float64, and narrows the result back to the input dtype on the
store. A bounds check (``i < n``) covers a last, partial block.

Defect: unnecessary dtype conversion. CUDA's fp32 ``erff`` is accurate to a
couple of ulp, far inside the fp32 tolerance, so the detour through double
buys nothing. It comes with a tiny launch configuration: 64 threads and
64 elements per CTA.

Why it is slow on a GPU: the op is memory-bound (one read, one write per
element), but the fp64 path makes it ALU-bound. Hopper's fp64 pipe has half
the fp32 rate per SM, and the double-precision ``erf`` is a long polynomial
evaluation with a branch on |x|, plus two F2F conversions per element. On
top of that, 64-element CTAs mean about one million CTAs at the default
shape, each moving 512 bytes, so block scheduling overhead and the few
scalar 4-byte loads in flight per thread keep the kernel far from HBM
bandwidth. The fix (``gelu_fast.py``): compute in fp32 and give every thread
several contiguous elements in a wide CTA so the loads vectorize.
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
BLOCK = 64
INV_SQRT2 = 0.7071067811865476


def build_gelu(n: int, dtype: str = "float32"):
    """prim_func for y = gelu(x) over a flat vector of n elements, computed in float64."""

    @T.prim_func
    def gelu_fp64(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            tx = T.get_thread_binding()
            i = bx * BLOCK + tx
            if i < n:
                xd = T.cast(X[i], "float64")  # the defect: widen to double "for accuracy"
                Y[i] = T.cast(0.5 * xd * (1.0 + T.erf(xd * INV_SQRT2)), dtype)

    return gelu_fp64


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def forward(self, x):
        xf = x.contiguous().view(-1)
        key = (xf.numel(), x.dtype)
        if key not in self._kernels:
            self._kernels[key] = tilelang.compile(build_gelu(xf.numel(), _TL_DTYPE[x.dtype]), out_idx=[1])
        y = self._kernels[key](xf)
        return y.view(x.shape)
