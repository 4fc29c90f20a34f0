"""GELU candidate (intent: inefficient), written 2026-12-04 before any timing.

Problem: catalogue op ``gelu`` (fp32, rows=4096 x cols=16384), exact erf form.

One program per 32-element block with a single warp ("one element per thread,
like CUDA"): 2M programs of one warp each, every thread moving a single
4-byte value. Block scheduling overhead and the small per-thread loads (no
vectorization, few bytes in flight per SM) should keep it well below HBM
bandwidth, so the library should be clearly faster.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = 0.5 * x * (1.0 + tl.math.erf(x / 1.4142135623730951))
    tl.store(y_ptr + offsets, y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 32),)](x, y, n, BLOCK_SIZE=32, num_warps=1)
        return y
