"""Matmul candidate in TileLang (intent: inefficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/matmul_fp16.py``: C = A @ B, fp16 (4096 x 4096 x
4096), fp16 output.

Small 64 x 64 x 32 tiles, 128 threads, T.Pipelined with num_stages=1 (no
copy/compute overlap: each K-step waits for its loads), no swizzled CTA
order, and the accumulator written straight from registers. Each CTA does
little math per byte it loads (64 x 64 tiles reuse each operand element 64
times instead of 128-256), and load latency is fully exposed: expected at a
fraction of cuBLAS's throughput.
"""
import torch
import tilelang
import tilelang.language as T

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
_TL_DTYPE = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def build_matmul(M: int, N: int, K: int, dtype: str = "float16"):
    @T.prim_func
    def mm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), T.ceildiv(M, BLOCK_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((BLOCK_M, BLOCK_K), dtype)
            b_s = T.alloc_shared((BLOCK_K, BLOCK_N), dtype)
            acc = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
            T.clear(acc)
            for kt in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=1):
                T.copy(A[by * BLOCK_M, kt * BLOCK_K], a_s)
                T.copy(B[kt * BLOCK_K, bx * BLOCK_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * BLOCK_M, bx * BLOCK_N])

    return mm


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        key = (M, N, K, A.dtype)
        if key not in self._kernels:
            self._kernels[key] = tilelang.compile(build_matmul(M, N, K, _TL_DTYPE[A.dtype]), out_idx=[2])
        return self._kernels[key](A.contiguous(), B.contiguous())
