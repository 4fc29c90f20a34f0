"""Sample 0 for problem 1: one program per row, a vector accumulator, one reduction at the end."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + cols
        acc += tl.load(x_ptr + row * N + offs, mask=offs < N, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n)
        y = torch.empty(x2.shape[0], device=x.device, dtype=x.dtype)
        block = min(triton.next_power_of_2(n), 4096)
        _rowsum[(x2.shape[0],)](x2, y, n, BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return y.view(x.shape[:-1])
