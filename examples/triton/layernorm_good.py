"""LayerNorm candidate (good): one program per row, chunked two-pass kernel.

The input is flattened to (rows, N) with N = prod(normalized_shape). Each
program owns one row and walks it in BLOCK-wide chunks (BLOCK a power of two,
at most 4096):

  pass 1: accumulate sum(x - k) and sum((x - k)^2) in fp32 *vectors* (one lane
          per element of the chunk, no per-chunk reduction); k = x[row, 0] is a
          shift that keeps the variance formula from cancelling badly when the
          row mean is large. Two tl.sum calls at the end give mean and var.
  pass 2: reload the row, normalize, apply weight/bias, store in x.dtype.

num_warps grows with BLOCK so that each thread holds a few elements and loads
are wide and coalesced. Parameters live in `self.ln` (an nn.LayerNorm used only
as a parameter holder) so the state_dict keys are `ln.weight` / `ln.bias`.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_row_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    shift = tl.load(x_row).to(tl.float32)

    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc_sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - shift, 0.0)
        acc += d
        acc_sq += d * d
    mean_d = tl.sum(acc, axis=0) / N
    var = tl.maximum(tl.sum(acc_sq, axis=0) / N - mean_d * mean_d, 0.0)
    mean = mean_d + shift
    rstd = 1.0 / tl.sqrt(var + eps)

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
        block = min(triton.next_power_of_2(n), 4096)
        num_warps = 16 if block >= 4096 else (8 if block >= 2048 else 4)
        _layernorm_row_kernel[(x2.shape[0],)](
            x2, self.ln.weight, self.ln.bias, y, n, self.ln.eps,
            BLOCK=block, num_warps=num_warps,
        )
        return y.view(x.shape)
