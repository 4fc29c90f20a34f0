"""Softmax candidate in TileLang (intent: inefficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/softmax.py``: softmax over the last dim of a
(4096, 8192) fp32 tensor.

One CTA of a single warp (32 threads) per row, and three passes over the row
straight from global memory in 256-wide chunks: (1) running max, (2) sum of
exp(x - max), (3) write exp(x - max) / sum. Each chunk is its own small
reduction (a warp reduction per 256 values), so every pass is a chain of 32
dependent load-reduce steps per row; with one warp per CTA, few bytes are in
flight per SM, and the row is read three times. Expected well below the
library's bandwidth.
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
THREADS = 32
CHUNK = 256


def build_softmax(rows: int, n: int, dtype: str = "float32"):
    acc = "float32"
    steps = T.ceildiv(n, CHUNK)

    @T.prim_func
    def softmax3(X: T.Tensor((rows, n), dtype), Y: T.Tensor((rows, n), dtype)):
        with T.Kernel(rows, threads=THREADS) as row:
            xf = T.alloc_fragment((CHUNK,), acc)
            cm = T.alloc_fragment((1,), acc)
            cs = T.alloc_fragment((1,), acc)
            m = T.alloc_fragment((1,), acc)
            s = T.alloc_fragment((1,), acc)
            m[0] = -T.infinity(acc)
            s[0] = 0.0
            for k in T.serial(steps):
                for j in T.Parallel(CHUNK):
                    xf[j] = T.if_then_else(k * CHUNK + j < n, T.cast(X[row, k * CHUNK + j], acc), -T.infinity(acc))
                T.reduce_max(xf, cm, dim=0)
                m[0] = T.max(m[0], cm[0])
            for k in T.serial(steps):
                for j in T.Parallel(CHUNK):
                    xf[j] = T.if_then_else(k * CHUNK + j < n, T.exp(T.cast(X[row, k * CHUNK + j], acc) - m[0]), 0.0)
                T.reduce_sum(xf, cs, dim=0)
                s[0] = s[0] + cs[0]
            for k in T.serial(steps):
                for j in T.Parallel(CHUNK):
                    if k * CHUNK + j < n:
                        Y[row, k * CHUNK + j] = T.cast(T.exp(T.cast(X[row, k * CHUNK + j], acc) - m[0]) / s[0], dtype)

    return softmax3


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.contiguous().view(-1, n)
        key = (x2.shape[0], n, x.dtype)
        if key not in self._kernels:
            self._kernels[key] = tilelang.compile(build_softmax(x2.shape[0], n, _TL_DTYPE[x.dtype]), out_idx=[1])
        return self._kernels[key](x2).view(x.shape)
