"""Softmax candidate (intent: efficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/softmax.py``: softmax over the last dim of a
(4096, 8192) fp32 tensor.

One program per row, 8 warps. Pass 1 walks the row in 2048-wide chunks with
an online softmax (running per-lane max and rescaled per-lane sum, merged with
one tl.max / tl.sum at the end); pass 2 re-reads the row, writes
exp(x - max) / sum. The second read of a 32 KB row mostly hits L2, so DRAM
traffic is close to one read and one write, which is what the library does.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_online_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes that have seen only -inf keep s = 0 (avoid inf - inf)
        s = tl.where(m_new == -float("inf"), 0.0, s * tl.exp(m - m_new) + tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    inv = 1.0 / row_sum
    for start in range(0, N, BLOCK):
        offs = start + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n)
        y = torch.empty_like(x2)
        block = min(triton.next_power_of_2(n), 2048)
        _softmax_online_kernel[(x2.shape[0],)](x2, y, n, BLOCK=block, num_warps=8)
        return y.view(x.shape)
