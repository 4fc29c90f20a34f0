"""Sample 1 for problem 1: drops the last column of every row (wrong results)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + offs, mask=offs < N, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        rows, n = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        _rowsum[(rows,)](x, y, n - 1, n, BLOCK=128)
        return y
