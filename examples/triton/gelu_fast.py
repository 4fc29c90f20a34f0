"""GELU candidate (fast): exact erf GELU, bandwidth-bound streaming kernel.

Problem: catalogue op ``gelu`` (fp32), y = 0.5 * x * (1 + erf(x / sqrt(2))), the
default (exact) form of torch.nn.functional.gelu.

Design: the tensor is treated as one flat contiguous vector. Each program
owns a BLOCK=4096 slice and runs with 8 warps, so each thread holds 16
consecutive elements: loads and stores compile to 128-bit vector accesses
(the base pointer is 16-byte aligned and BLOCK is a multiple of 4, which
Triton's divisibility specialization sees). Math stays in fp32: tl.math.erf in
fp32 is accurate to a few ulp, well inside the 1e-4 tolerance. GELU does ~5
flops per 8 bytes, so the kernel is limited by HBM bandwidth; the large block
keeps enough bytes in flight per SM to reach it.

Offsets are int64 so tensors above 2^31 elements index correctly.
"""
import torch
import triton
import triton.language as tl


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
        block = 4096
        _gelu_kernel[(triton.cdiv(n, block),)](xc, y, n, BLOCK=block, num_warps=8)
        return y.view(x.shape)
