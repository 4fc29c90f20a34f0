"""Row-sum candidate (good): sum over the last dim, output shape x.shape[:-1].

One program per row. The program walks its row in BLOCK-wide chunks
(BLOCK = min(next_pow2(N), 4096)) and adds each chunk into an fp32 *vector*
accumulator, so the loop body is just wide coalesced loads and lane-wise adds
with no cross-lane work; a single tl.sum at the end reduces the vector to the
row total, which is cast to x.dtype on store.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + cols
        acc += tl.load(x_row + offs, mask=offs < N, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n)
        out = torch.empty(x2.shape[0], device=x.device, dtype=x.dtype)
        block = min(triton.next_power_of_2(n), 4096)
        num_warps = 8 if block >= 2048 else 4
        _rowsum_kernel[(x2.shape[0],)](x2, out, n, BLOCK=block, num_warps=num_warps)
        return out.view(x.shape[:-1])
