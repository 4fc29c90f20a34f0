"""LayerNorm candidate in TileLang (good): one CTA per row, the row held in registers.

For ``examples/problems/layernorm.py`` ((4096, 4096) fp32, nn.LayerNorm with
weight and bias, eps 1e-5). The input is flattened to (rows, N) with
N = prod(normalized_shape).

Each CTA of 256 threads owns one row. For N up to 8192 the row is read once
into a per-thread fp32 register fragment (16 values per thread at N = 4096,
as contiguous 16-byte loads); the mean comes from one ``T.reduce_sum``, then
the variance from a second reduction of (x - mean)^2 over the same registers
(an exact two-pass variance at no extra memory traffic), and the normalized,
affine-transformed row is written straight from registers. DRAM traffic is
one read and one write of x.

Longer rows use a chunked two-pass form: pass 1 accumulates sum(x - k) and
sum((x - k)^2) in fp32 fragments over 4096-wide slices (k = x[row, 0], a
shift that keeps the one-pass variance from cancelling), pass 2 reloads each
slice and normalizes. That path keeps one CTA per row, so a problem with
few, very long rows (``layernorm_kb.py``: 16 rows of 4M elements) leaves
most SMs idle and is not expected to reach the library's speed there.

Parameters live in ``self.ln`` (an nn.LayerNorm used only as a parameter
holder), so the state_dict keys are ``ln.weight`` / ``ln.bias``. Output in
x's dtype; statistics in fp32. Compiled once per (rows, N, dtypes), cached.
"""
import math

import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
THREADS = 256
MAX_RESIDENT = 8192
CHUNK = 4096


def build_layernorm(rows: int, n: int, eps: float = 1e-5, dtype: str = "float32", w_dtype: str = "float32"):
    """prim_func for Y (rows, n) = LayerNorm(X) * W + B over the last dim."""
    acc = "float32"
    inv_n = 1.0 / n

    if n <= MAX_RESIDENT:
        padded = T.ceildiv(n, THREADS) * THREADS  # fragment length the 256 threads can share evenly

        @T.prim_func
        def layernorm(X: T.Tensor((rows, n), dtype), W: T.Tensor((n,), w_dtype), B: T.Tensor((n,), w_dtype),
                      Y: T.Tensor((rows, n), dtype)):
            with T.Kernel(rows, threads=THREADS) as row:
                xf = T.alloc_fragment((padded,), acc)
                dev = T.alloc_fragment((padded,), acc)
                mean = T.alloc_fragment((1,), acc)
                var = T.alloc_fragment((1,), acc)
                for j in T.Parallel(padded):
                    xf[j] = T.if_then_else(j < n, T.cast(X[row, j], acc), 0.0)
                T.reduce_sum(xf, mean, dim=0)
                mean[0] = mean[0] * inv_n
                for j in T.Parallel(padded):
                    xf[j] = T.if_then_else(j < n, xf[j] - mean[0], 0.0)
                for j in T.Parallel(padded):
                    dev[j] = xf[j] * xf[j]
                T.reduce_sum(dev, var, dim=0)
                var[0] = T.rsqrt(var[0] * inv_n + eps)
                for j in T.Parallel(padded):
                    if j < n:
                        Y[row, j] = T.cast(xf[j] * var[0] * T.cast(W[j], acc) + T.cast(B[j], acc), dtype)

        return layernorm

    steps = T.ceildiv(n, CHUNK)

    @T.prim_func
    def layernorm_chunked(X: T.Tensor((rows, n), dtype), W: T.Tensor((n,), w_dtype), B: T.Tensor((n,), w_dtype),
                          Y: T.Tensor((rows, n), dtype)):
        with T.Kernel(rows, threads=THREADS) as row:
            s1 = T.alloc_fragment((CHUNK,), acc)
            s2 = T.alloc_fragment((CHUNK,), acc)
            tot1 = T.alloc_fragment((1,), acc)
            tot2 = T.alloc_fragment((1,), acc)
            shift = T.alloc_fragment((1,), acc)
            T.clear(s1)
            T.clear(s2)
            shift[0] = T.cast(X[row, 0], acc)
            for s in T.serial(steps):
                for j in T.Parallel(CHUNK):
                    s1[j] += T.if_then_else(s * CHUNK + j < n, T.cast(X[row, s * CHUNK + j], acc) - shift[0], 0.0)
                for j in T.Parallel(CHUNK):
                    s2[j] += T.if_then_else(s * CHUNK + j < n,
                                            (T.cast(X[row, s * CHUNK + j], acc) - shift[0])
                                            * (T.cast(X[row, s * CHUNK + j], acc) - shift[0]), 0.0)
            T.reduce_sum(s1, tot1, dim=0)
            T.reduce_sum(s2, tot2, dim=0)
            tot1[0] = tot1[0] * inv_n  # mean of (x - shift)
            tot2[0] = T.rsqrt(T.max(tot2[0] * inv_n - tot1[0] * tot1[0], 0.0) + eps)  # 1 / std
            tot1[0] = tot1[0] + shift[0]  # mean
            for s in T.serial(steps):
                for j in T.Parallel(CHUNK):
                    if s * CHUNK + j < n:
                        Y[row, s * CHUNK + j] = T.cast(
                            (T.cast(X[row, s * CHUNK + j], acc) - tot1[0]) * tot2[0] * T.cast(W[s * CHUNK + j], acc)
                            + T.cast(B[s * CHUNK + j], acc), dtype)

    return layernorm_chunked


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
