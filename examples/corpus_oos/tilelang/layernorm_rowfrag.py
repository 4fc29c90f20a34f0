"""LayerNorm candidate in TileLang (intent: efficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/layernorm.py``: nn.LayerNorm over the last dim of
a (4096, 4096) fp32 tensor, weight and bias, eps 1e-5.

One CTA of 512 threads per row; the row (up to 8192 values) is loaded once
into an fp32 register fragment (8 per thread at N = 4096), the mean comes
from one T.reduce_sum, the variance from a second T.reduce_sum over the
centered values (two-pass, no cancellation), and the normalized, scaled and
shifted row is written from the same registers. One read and one write of x:
expected on par with PyTorch's fused layer_norm.
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
THREADS = 512


def build_layernorm(rows: int, n: int, eps: float, dtype: str = "float32", w_dtype: str = "float32"):
    acc = "float32"
    padded = T.ceildiv(n, THREADS) * THREADS
    inv_n = 1.0 / n

    @T.prim_func
    def layernorm(X: T.Tensor((rows, n), dtype), W: T.Tensor((n,), w_dtype), B: T.Tensor((n,), w_dtype),
                  Y: T.Tensor((rows, n), dtype)):
        with T.Kernel(rows, threads=THREADS) as row:
            xf = T.alloc_fragment((padded,), acc)
            sq = T.alloc_fragment((padded,), acc)
            mean = T.alloc_fragment((1,), acc)
            var = T.alloc_fragment((1,), acc)
            for j in T.Parallel(padded):
                xf[j] = T.if_then_else(j < n, T.cast(X[row, j], acc), 0.0)
            T.reduce_sum(xf, mean, dim=0)
            mean[0] = mean[0] * inv_n
            for j in T.Parallel(padded):
                xf[j] = T.if_then_else(j < n, xf[j] - mean[0], 0.0)
            for j in T.Parallel(padded):
                sq[j] = xf[j] * xf[j]
            T.reduce_sum(sq, var, dim=0)
            var[0] = T.rsqrt(var[0] * inv_n + eps)
            for j in T.Parallel(padded):
                if j < n:
                    Y[row, j] = T.cast(xf[j] * var[0] * T.cast(W[j], acc) + T.cast(B[j], acc), dtype)

    return layernorm


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape)
        self._kernels = {}

    def forward(self, x):
        n = self.ln.weight.numel()
        if n > 8192:
            raise ValueError("layernorm_rowfrag: rows longer than 8192 are not supported")
        x2 = x.contiguous().view(-1, n)
        key = (x2.shape[0], n, x.dtype)
        if key not in self._kernels:
            self._kernels[key] = tilelang.compile(
                build_layernorm(x2.shape[0], n, self.ln.eps, _TL_DTYPE[x.dtype], _TL_DTYPE[self.ln.weight.dtype]),
                out_idx=[3])
        return self._kernels[key](x2, self.ln.weight, self.ln.bias).view(x.shape)
