"""GELU candidate in TileLang (intent: inefficient), written 2026-12-04 before any timing.

Problem: catalogue op ``gelu`` (fp32, rows=4096 x cols=16384), exact erf form.

The direct port of a "one element per thread" CUDA kernel: CTAs of 64
threads, each thread reads one fp32 value from global memory, computes GELU
and writes it back; 1M CTAs for 67M elements. Scalar 4-byte accesses and
tiny CTAs (CTA-launch rate, at most 32 resident CTAs = 2048 threads of one
load each per SM) should keep it clearly below HBM bandwidth.
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
THREADS = 64


def build_gelu(n: int, dtype: str = "float32"):
    @T.prim_func
    def gelu(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, THREADS), threads=THREADS) as bx:
            tx = T.get_thread_binding()
            i = bx * THREADS + tx
            if i < n:
                v = T.cast(X[i], "float32")
                Y[i] = T.cast(0.5 * v * (1.0 + T.erf(v * 0.7071067811865476)), dtype)

    return gelu


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def forward(self, x):
        xf = x.contiguous().view(-1)
        key = (xf.numel(), x.dtype)
        if key not in self._kernels:
            self._kernels[key] = tilelang.compile(build_gelu(xf.numel(), _TL_DTYPE[x.dtype]), out_idx=[1])
        return self._kernels[key](xf).view(x.shape)
