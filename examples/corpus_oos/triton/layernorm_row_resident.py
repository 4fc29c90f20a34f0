"""LayerNorm candidate (intent: efficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/layernorm.py``: nn.LayerNorm over the last dim of
a (4096, 4096) fp32 tensor, weight and bias, eps 1e-5.

One program per row with the whole row in registers (BLOCK = next power of two
of N = 4096, 16 warps, so 8 values per thread): load once, mean with one
tl.sum, variance of the centered values with a second tl.sum (exact two-pass
statistics, no E[x^2] - E[x]^2 cancellation), normalize, scale, shift, store.
DRAM traffic is one read and one write of x: expected to match PyTorch's
fused layer_norm kernel. Rows longer than 16384 are refused (this kernel is
written for the problem's shape).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _ln_fwd(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, (xc * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape)

    def forward(self, x):
        n = self.ln.weight.numel()
        if n > 16384:
            raise ValueError("layernorm_row_resident: rows longer than 16384 are not supported")
        x2 = x.contiguous().view(-1, n)
        y = torch.empty_like(x2)
        block = triton.next_power_of_2(n)
        warps = 16 if block >= 4096 else (8 if block >= 1024 else 4)
        _ln_fwd[(x2.shape[0],)](x2, self.ln.weight, self.ln.bias, y, n, self.ln.eps, BLOCK=block,
                               num_warps=warps)
        return y.view(x.shape)
