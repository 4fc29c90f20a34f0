"""LayerNorm candidate (deliberately bad): correct, but slow.

Defect: one program per row with a fixed BLOCK=32 and num_warps=1, and a
sequential reduction. Every 32-element chunk is reduced to a scalar with
tl.sum inside the loop, so each iteration ends in a cross-lane shuffle
reduction and the next iteration depends on that scalar: a serial chain of
N/32 tiny steps (128 for N=4096, 131072 for the 4M-element KernelBench rows).
It also makes three passes over the row (mean, then variance, then normalize)
instead of two.

Why it is slow on a GPU: a single warp issues only 128-byte loads with little
memory-level parallelism, so the SM sits waiting on latency instead of
streaming at HBM bandwidth; with only a few rows (KernelBench: 16 rows) almost
all of the GPU is idle.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_slow_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK)

    total = 0.0
    for start in range(0, N, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < N, other=0.0).to(tl.float32)
        total += tl.sum(x, axis=0)
    mean = total / N

    sq = 0.0
    for start in range(0, N, BLOCK):
        offs = start + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        sq += tl.sum(d * d, axis=0)
    rstd = 1.0 / tl.sqrt(sq / N + eps)

    for start in range(0, N, BLOCK):
        offs = start + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=1.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape)  # parameter holder only

    def forward(self, x):
        n = self.ln.weight.numel()
        x2 = x.contiguous().view(-1, n)
        y = torch.empty_like(x2)
        _layernorm_slow_kernel[(x2.shape[0],)](
            x2, self.ln.weight, self.ln.bias, y, n, self.ln.eps,
            BLOCK=32, num_warps=1,
        )
        return y.view(x.shape)
