"""RMSNorm candidate (intent: inefficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/rmsnorm.py``: y = x * rsqrt(mean(x^2, -1) + 1e-6)
* weight over the last dim of a (4096, 4096) fp32 tensor.

A "persistent" kernel as an LLM might write it: a fixed grid of 132 programs
(the H200's SM count, hard-coded), each with ONE warp, loops over its share
of the rows; per row it walks 256-wide chunks twice (sum of squares, then
normalize and store). One warp per SM keeps only a few KB of loads in flight
per SM, far too little to cover HBM latency, so bandwidth should stay at a
fraction of the library's.
"""
import torch
import triton
import triton.language as tl

NUM_PROGRAMS = 132


@triton.jit
def _rmsnorm_persistent(x_ptr, w_ptr, y_ptr, M, N, eps, NPROG: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for row in range(pid, M, NPROG):
        base = row * N  # 4096 * 4096 < 2**31 at the problem shape
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            offs = start + cols
            x = tl.load(x_ptr + base + offs, mask=offs < N, other=0.0).to(tl.float32)
            acc += x * x
        r = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        for start in range(0, N, BLOCK):
            offs = start + cols
            mask = offs < N
            x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + base + offs, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        n = self.weight.numel()
        x2 = x.contiguous().view(-1, n)
        y = torch.empty_like(x2)
        _rmsnorm_persistent[(NUM_PROGRAMS,)](x2, self.weight, y, x2.shape[0], n, self.eps,
                                            NPROG=NUM_PROGRAMS, BLOCK=256, num_warps=1)
        return y.view(x.shape)
