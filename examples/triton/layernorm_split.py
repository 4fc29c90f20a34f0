"""LayerNorm candidate (good, split rows): for few, very long rows.

KernelBench L1 #40 normalizes 16 rows of 4M elements: one program per row
would put 16 programs on a GPU with 132 SMs. Here each row is cut into CHUNK-
sized pieces handled by separate programs, in three launches:

  1. _partial_stats_kernel, grid (rows, chunks): each program reduces its chunk
     to sum(x - k) and sum((x - k)^2) (fp32, k = x[row, 0] as a shift against
     cancellation) and writes them into a small fp32 buffer (rows, chunks, 2).
  2. _combine_kernel, grid (rows,): adds the partials of a row into mean and
     rstd (buffer (rows, 2)).
  3. _normalize_kernel, grid (rows, chunks): normalize + affine, store in x.dtype.

Traffic is two reads and one write of x, same as the one-program-per-row
kernel, but every SM has work. For (4096, 4096) it degenerates to one chunk
per row: still correct, but three short launches make it slower there than
the fused one-program-per-row kernel (layernorm_good.py).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _partial_stats_kernel(x_ptr, part_ptr, N, n_chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    x_row = x_ptr + row * N
    shift = tl.load(x_row).to(tl.float32)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc_sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, CHUNK, BLOCK):
        offs = chunk * CHUNK + start + tl.arange(0, BLOCK)
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - shift, 0.0)
        acc += d
        acc_sq += d * d
    out = part_ptr + (row * n_chunks + chunk) * 2
    tl.store(out, tl.sum(acc, axis=0))
    tl.store(out + 1, tl.sum(acc_sq, axis=0))


@triton.jit
def _combine_kernel(x_ptr, part_ptr, stats_ptr, N, n_chunks, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s1 = tl.zeros([BLOCK], dtype=tl.float32)
    s2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_chunks, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        mask = idx < n_chunks
        p = part_ptr + (row * n_chunks + idx) * 2
        s1 += tl.load(p, mask=mask, other=0.0)
        s2 += tl.load(p + 1, mask=mask, other=0.0)
    mean_d = tl.sum(s1, axis=0) / N
    var = tl.maximum(tl.sum(s2, axis=0) / N - mean_d * mean_d, 0.0)
    shift = tl.load(x_ptr + row * N).to(tl.float32)
    tl.store(stats_ptr + row * 2, mean_d + shift)
    tl.store(stats_ptr + row * 2 + 1, 1.0 / tl.sqrt(var + eps))


@triton.jit
def _normalize_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stats_ptr, N, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    mean = tl.load(stats_ptr + row * 2)
    rstd = tl.load(stats_ptr + row * 2 + 1)
    for start in range(0, CHUNK, BLOCK):
        offs = chunk * CHUNK + start + tl.arange(0, BLOCK)
        mask = offs < N
        x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=1.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + row * N + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape)  # parameter holder only

    def forward(self, x):
        n = self.ln.weight.numel()
        x2 = x.contiguous().view(-1, n)
        rows = x2.shape[0]
        y = torch.empty_like(x2)
        chunk = min(triton.next_power_of_2(n), 16384)
        block = min(chunk, 4096)
        n_chunks = triton.cdiv(n, chunk)
        num_warps = 16 if block >= 4096 else (8 if block >= 2048 else 4)
        part = torch.empty((rows, n_chunks, 2), device=x.device, dtype=torch.float32)
        stats = torch.empty((rows, 2), device=x.device, dtype=torch.float32)
        grid = (rows, n_chunks)
        _partial_stats_kernel[grid](x2, part, n, n_chunks, CHUNK=chunk, BLOCK=block, num_warps=num_warps)
        cblock = min(triton.next_power_of_2(n_chunks), 1024)
        _combine_kernel[(rows,)](x2, part, stats, n, n_chunks, self.ln.eps, BLOCK=cblock, num_warps=4)
        _normalize_kernel[grid](x2, self.ln.weight, self.ln.bias, y, stats, n,
                                CHUNK=chunk, BLOCK=block, num_warps=num_warps)
        return y.view(x.shape)
