"""Row-sum candidate (intent: inefficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/rowsum.py``: sum over the last dim of a
(4096, 8192) fp32 tensor -> (4096,).

"Vectorize over rows": each program owns ROWS_PER_PROG = 32 rows and walks the
columns one at a time, loading x[rows, j] (32 values 32 KB apart) per step and
adding them into a 32-wide accumulator. Every load touches 32 different cache
lines for 128 useful bytes, the loop runs 8192 dependent iterations, and only
128 programs exist for 132 SMs. Expected to be an order of magnitude slower
than torch.sum.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_cols_kernel(x_ptr, out_ptr, M, N, ROWS_PER_PROG: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS_PER_PROG + tl.arange(0, ROWS_PER_PROG)
    rmask = rows < M
    acc = tl.zeros([ROWS_PER_PROG], dtype=tl.float32)
    for j in range(0, N):
        acc += tl.load(x_ptr + rows.to(tl.int64) * N + j, mask=rmask, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, acc.to(out_ptr.dtype.element_ty), mask=rmask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n)
        m = x2.shape[0]
        out = torch.empty(m, device=x.device, dtype=x.dtype)
        _rowsum_cols_kernel[(triton.cdiv(m, 32),)](x2, out, m, n, ROWS_PER_PROG=32, num_warps=1)
        return out.view(x.shape[:-1])
