"""Softmax candidate (intent: inefficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/softmax.py``: softmax over the last dim of a
(4096, 8192) fp32 tensor.

"Step by step, one kernel per step": kernel 1 writes each row's max to a
buffer, kernel 2 writes each row's sum of exp(x - max), kernel 3 writes
exp(x - max) / sum. Each kernel streams the whole 128 MB input from HBM
(it does not fit the 50 MB L2), so DRAM traffic is three reads and one write
instead of one read and one write, plus two extra launches: expected about
2x slower than the library.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_max_kernel(x_ptr, max_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + cols
        m = tl.maximum(m, tl.load(x_ptr + row * N + offs, mask=offs < N, other=-float("inf")))
    tl.store(max_ptr + row, tl.max(m, axis=0))


@triton.jit
def _row_expsum_kernel(x_ptr, max_ptr, sum_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mx = tl.load(max_ptr + row)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + cols
        x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=-float("inf"))
        s += tl.exp(x - mx)
    tl.store(sum_ptr + row, tl.sum(s, axis=0))


@triton.jit
def _normalize_kernel(x_ptr, max_ptr, sum_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mx = tl.load(max_ptr + row)
    s = tl.load(sum_ptr + row)
    for start in range(0, N, BLOCK):
        offs = start + cols
        mask = offs < N
        x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0)
        tl.store(y_ptr + row * N + offs, tl.exp(x - mx) / s, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n).float()
        rows = x2.shape[0]
        mx = torch.empty(rows, device=x.device, dtype=torch.float32)
        sm = torch.empty(rows, device=x.device, dtype=torch.float32)
        y = torch.empty_like(x2)
        block = min(triton.next_power_of_2(n), 1024)
        _row_max_kernel[(rows,)](x2, mx, n, BLOCK=block, num_warps=4)
        _row_expsum_kernel[(rows,)](x2, mx, sm, n, BLOCK=block, num_warps=4)
        _normalize_kernel[(rows,)](x2, mx, sm, y, n, BLOCK=block, num_warps=4)
        return y.to(x.dtype).view(x.shape)
