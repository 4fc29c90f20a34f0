"""Row-sum candidate (intent: efficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/rowsum.py``: sum over the last dim of a
(4096, 8192) fp32 tensor -> (4096,).

Split-K style: the grid is (rows, SPLIT) with SPLIT = 4, each program sums a
2048-wide slice of its row with 8 warps (wide coalesced loads into an fp32
vector accumulator, one tl.sum at the end) and adds its partial into a
zero-initialized fp32 output with tl.atomic_add. 16K programs keep every SM
busy; the extra zero-fill of the 16 KB output and 4 atomics per row are
negligible next to reading 128 MB, so it should stream at HBM bandwidth.
(The atomics make the summation order non-deterministic; fp32 rounding
differences stay far inside the tolerance.)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_split_kernel(x_ptr, out_ptr, N, CHUNK, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    begin = part * CHUNK
    for start in range(0, CHUNK, BLOCK):
        offs = begin + start + cols
        mask = (offs < N) & (start + cols < CHUNK)
        acc += tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n)
        rows = x2.shape[0]
        split = 4 if n >= 4096 else 1
        chunk = triton.cdiv(n, split)
        block = min(triton.next_power_of_2(chunk), 2048)
        out = torch.zeros(rows, device=x.device, dtype=torch.float32)
        _rowsum_split_kernel[(rows, split)](x2, out, n, chunk, BLOCK=block, num_warps=8)
        return out.to(x.dtype).view(x.shape[:-1])
