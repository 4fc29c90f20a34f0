"""GELU candidate (deliberately slow): exact erf GELU computed in fp64.

Problem: catalogue op ``gelu`` (fp32), y = 0.5 * x * (1 + erf(x / sqrt(2))), the
default (exact) form of torch.nn.functional.gelu.

Design: the input is viewed as one flat vector; each program handles one
BLOCK=64 chunk with a single warp (num_warps=1), loads it, widens it to fp64
(x.to(tl.float64)), evaluates erf and the products in fp64, and narrows the
result back to fp32 on the store.

Defect: unnecessary dtype conversion. fp32 erf is already accurate to a few
ulp, far inside the fp32 tolerance, so the fp64 detour buys nothing. It is
combined with a tiny launch configuration (64 elements, one warp per program).

Why it is slow on a GPU: H100/H200 run fp64 at a fraction of the fp32 rate, and
libdevice's fp64 erf is a long polynomial with a branch, so a kernel that
should stream at HBM bandwidth becomes fp64-ALU bound. 64-element one-warp
programs also mean ~1M programs for the default 4096 x 16384 shape, each moving
only 256 bytes in and out, so launch/scheduling overhead and poor memory-level
parallelism add to the cost.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _gelu_fp64_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # the defect: widen to double "for accuracy"; every op below runs on the fp64 units
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    inv_sqrt2 = 0.7071067811865476
    y = 0.5 * x * (1.0 + tl.math.erf(x * inv_sqrt2))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        xc = x.contiguous()
        y = torch.empty_like(xc)
        n = xc.numel()
        block = 64
        _gelu_fp64_kernel[(triton.cdiv(n, block),)](xc, y, n, BLOCK=block, num_warps=1)
        return y.view(x.shape)
