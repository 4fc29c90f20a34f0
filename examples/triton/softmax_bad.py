"""Softmax candidate (deliberately bad): correct, but slow.

Defect: three separate kernels, each with BLOCK=16 and num_warps=1, and each
walking its row 16 elements at a time with a scalar loop-carried accumulator:
  1. _row_max_kernel     -> max of the row into an fp32 buffer
  2. _row_sumexp_kernel  -> sum(exp(x - max)) into another buffer
  3. _normalize_kernel   -> exp(x - max) / sum written to the output
That is three full reads of x (plus a write) instead of one read and one
write, three launches, and per iteration only 64 bytes loaded by half a warp
followed by a shuffle reduction that the next iteration must wait on. The GPU
ends up latency-bound at a small fraction of HBM bandwidth.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_max_kernel(x_ptr, max_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = float("-inf")
    for start in range(0, N, BLOCK):
        offs = start + cols
        x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    tl.store(max_ptr + row, m)


@triton.jit
def _row_sumexp_kernel(x_ptr, max_ptr, sum_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.load(max_ptr + row)
    s = 0.0
    for start in range(0, N, BLOCK):
        offs = start + cols
        x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=float("-inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    tl.store(sum_ptr + row, s)


@triton.jit
def _normalize_kernel(x_ptr, max_ptr, sum_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.load(max_ptr + row)
    s = tl.load(sum_ptr + row)
    for start in range(0, N, BLOCK):
        offs = start + cols
        mask = offs < N
        x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp(x - m) / s
        tl.store(y_ptr + row * N + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n)
        rows = x2.shape[0]
        y = torch.empty_like(x2)
        row_max = torch.empty(rows, device=x.device, dtype=torch.float32)
        row_sum = torch.empty(rows, device=x.device, dtype=torch.float32)
        _row_max_kernel[(rows,)](x2, row_max, n, BLOCK=16, num_warps=1)
        _row_sumexp_kernel[(rows,)](x2, row_max, row_sum, n, BLOCK=16, num_warps=1)
        _normalize_kernel[(rows,)](x2, row_max, row_sum, y, n, BLOCK=16, num_warps=1)
        return y.view(x.shape)
