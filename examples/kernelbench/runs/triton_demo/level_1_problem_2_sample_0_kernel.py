"""Sample 0 for problem 2: column scale. ``scale`` starts as ones; the reference's values arrive by load_state_dict."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_cols(x_ptr, s_ptr, y_ptr, n_elements, dim, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + offs % dim, mask=mask)
    tl.store(y_ptr + offs, x * s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = 1024
        _scale_cols[(triton.cdiv(n, block),)](x, self.scale, y, n, self.scale.numel(), BLOCK=block)
        return y
