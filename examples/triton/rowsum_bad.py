"""Row-sum candidate (deliberately bad): correct, but slow.

Defect: one program per row with num_warps=1 and a BLOCK=1 scalar loop: the
row is summed one element at a time, each load feeding a loop-carried fp32
add. On a GPU this is a fully serial reduction: per iteration a 4-byte load
whose latency (hundreds of cycles) cannot be hidden because the next add
depends on it, 31 of the warp's 32 lanes doing nothing, and no coalescing
across lanes. For (4096, 8192) that is 8192 dependent steps per row, orders of
magnitude below memory bandwidth.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_serial_kernel(x_ptr, out_ptr, N):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    acc = tl.load(x_row).to(tl.float32)
    for i in range(1, N):
        acc += tl.load(x_row + i).to(tl.float32)
    tl.store(out_ptr + row, acc.to(out_ptr.dtype.element_ty))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n)
        out = torch.empty(x2.shape[0], device=x.device, dtype=x.dtype)
        _rowsum_serial_kernel[(x2.shape[0],)](x2, out, n, num_warps=1)
        return out.view(x.shape[:-1])
