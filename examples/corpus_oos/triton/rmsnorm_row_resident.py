"""RMSNorm candidate (intent: efficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/rmsnorm.py``: y = x * rsqrt(mean(x^2, -1) + 1e-6)
* weight over the last dim of a (4096, 4096) fp32 tensor.

One program per row, the whole row in registers (BLOCK = next_pow2(N), 8 warps
at N = 4096, 16 values per thread as 16-byte vectors): one load, one tl.sum of
squares, rsqrt, scale by the weight, one store. One read and one write of x,
so it should run at memory bandwidth like a fused library RMSNorm.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / N
    r = tl.rsqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        n = self.weight.numel()
        x2 = x.contiguous().view(-1, n)
        y = torch.empty_like(x2)
        block = triton.next_power_of_2(n)
        _rmsnorm_kernel[(x2.shape[0],)](x2, self.weight, y, n, self.eps, BLOCK=block,
                                        num_warps=8 if block >= 2048 else 4)
        return y.view(x.shape)
