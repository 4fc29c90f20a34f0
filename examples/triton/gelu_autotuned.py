"""GELU candidate (autotuned): the streaming kernel of gelu_fast.py, its block and warps chosen per size.

Problem: catalogue op ``gelu`` (fp32), y = 0.5 * x * (1 + erf(x / sqrt(2))), the
default (exact) form of torch.nn.functional.gelu.

Why a second version: gelu_fast.py fixes BLOCK=4096 with 8 warps, 16 elements per
thread. That keeps 64 bytes per thread in flight but gives few, fat programs and a
long dependent erf chain per thread; a bandwidth-bound kernel usually does best
with 4-8 elements per thread and many resident programs. Rather than guess, this
version lets ``triton.autotune`` time a handful of (BLOCK, num_warps) pairs the
first time it sees a size (key ``n``) and keeps the fastest. Every config keeps
at least 4 consecutive fp32 elements per thread, so loads and stores stay 128-bit.

Math stays in fp32 (tl.math.erf, a few ulp). Offsets are int64.
"""
import torch
import triton
import triton.language as tl

_CONFIGS = [triton.Config({"BLOCK": block}, num_warps=warps)
            for block, warps in ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (1024, 2), (512, 2))]


@triton.autotune(configs=_CONFIGS, key=["n"])
@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        xc = x.contiguous()
        y = torch.empty_like(xc)
        n = xc.numel()
        _gelu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](xc, y, n)
        return y.view(x.shape)
