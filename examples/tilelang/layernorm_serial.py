"""LayerNorm candidate in TileLang (deliberately slow): one thread per row, serial loops.

For ``examples/problems/layernorm.py`` ((4096, 4096) fp32, nn.LayerNorm with
weight and bias, eps 1e-5). The input is flattened to (rows, N) with
N = prod(normalized_shape). It passes a numerics check: the statistics are
an exact two-pass mean and variance in fp32.

Design: one *thread* per row. A CTA of 1024 threads (the largest block, the
author's idea of "maximum occupancy") takes 1024 consecutive rows; thread t
owns row bx * 1024 + t and walks it three times with ``T.serial`` loops,
one element per iteration, into private fp32 registers:
  1. sum of x                -> mean
  2. sum of (x - mean)^2     -> variance -> rstd = rsqrt(var + eps)
  3. (x - mean) * rstd * weight + bias, written to the output.
Rows past the end (rows not a multiple of 1024) are skipped by a bounds
check; any N works.

Defect: the work is split across rows instead of along them.
- Uncoalesced, scalar access: the 32 lanes of a warp read 32 different rows,
  16 KB apart at N = 4096, so every warp-wide load or store touches 32
  separate cache lines and costs 32 L1 wavefronts for 128 useful bytes;
  nothing can be vectorized. Three reads and one write of x go this way.
- Serial reductions: 4096 dependent adds per statistic per row instead of a
  tree across threads.
- Almost no parallelism: 4096 rows give 4096 threads in all, i.e. 4 CTAs,
  so 4 of the H200's 132 SMs do all the work, each bound by its L1's
  one-wavefront-per-cycle rate.
A PyTorch LayerNorm streams x at close to HBM bandwidth; this runs two
orders of magnitude slower. The fix is the layout of ``layernorm_good.py``:
one CTA per row, threads striding across the row with contiguous vector
loads into a register fragment, and ``T.reduce_sum`` for the statistics.

Parameters live in ``self.ln`` (an nn.LayerNorm used only as a parameter
holder), so the state_dict keys are ``ln.weight`` / ``ln.bias``. Output in
x's dtype. Compiled once per (rows, N, dtypes) and cached.
"""
import math

import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
ROWS_PER_CTA = 1024  # one thread per row


def build_layernorm(rows: int, n: int, eps: float = 1e-5, dtype: str = "float32", w_dtype: str = "float32"):
    """prim_func for Y (rows, n) = LayerNorm(X) * W + B over the last dim, one thread per row."""
    acc = "float32"
    inv_n = 1.0 / n

    @T.prim_func
    def layernorm_rowwise(X: T.Tensor((rows, n), dtype), W: T.Tensor((n,), w_dtype), B: T.Tensor((n,), w_dtype),
                          Y: T.Tensor((rows, n), dtype)):
        with T.Kernel(T.ceildiv(rows, ROWS_PER_CTA), threads=ROWS_PER_CTA) as bx:
            tx = T.get_thread_binding()
            row = bx * ROWS_PER_CTA + tx
            mean = T.alloc_local((1,), acc)
            var = T.alloc_local((1,), acc)
            if row < rows:
                mean[0] = 0.0
                for j in T.serial(n):
                    mean[0] += T.cast(X[row, j], acc)
                mean[0] = mean[0] * inv_n
                var[0] = 0.0
                for j in T.serial(n):
                    var[0] += (T.cast(X[row, j], acc) - mean[0]) * (T.cast(X[row, j], acc) - mean[0])
                var[0] = T.rsqrt(var[0] * inv_n + eps)  # now 1 / std
                for j in T.serial(n):
                    Y[row, j] = T.cast((T.cast(X[row, j], acc) - mean[0]) * var[0] * T.cast(W[j], acc)
                                       + T.cast(B[j], acc), dtype)

    return layernorm_rowwise


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape)  # parameter holder only
        self._kernels = {}

    def forward(self, x):
        n = math.prod(self.ln.normalized_shape)
        x2 = x.contiguous().view(-1, n)
        key = (x2.shape[0], n, x.dtype, self.ln.weight.dtype)
        if key not in self._kernels:
            func = build_layernorm(x2.shape[0], n, self.ln.eps, _TL_DTYPE[x.dtype], _TL_DTYPE[self.ln.weight.dtype])
            self._kernels[key] = tilelang.compile(func, out_idx=[3])
        w = self.ln.weight.reshape(-1).contiguous()
        b = self.ln.bias.reshape(-1).contiguous()
        y = self._kernels[key](x2, w, b)
        return y.view(x.shape)
