"""Matmul candidate in TileLang (deliberately naive): correct, but slow.

Defect: no data reuse through shared memory and no tensor cores. Each CTA of
256 threads covers a 16 x 16 tile of C, one output element per thread, and
runs the K loop as a serial ``T.serial`` loop whose body reads A[m, k] and
B[k, n] straight from global memory into a scalar FMA on CUDA cores (fp32
accumulator in a register fragment). Every A element is fetched by every one
of the N/16 CTAs of its tile row and every B element by the M/16 CTAs of its
tile column, through L1/L2 only; the 2*M*N*K flops run on the FMA pipes at a
small fraction of their peak, limited by load throughput and latency.

On (4096, 4096, 4096) it is one to two orders of magnitude slower than
cuBLAS. The fix is ``matmul_good.py``: stage A and B tiles (128 x 256 x 64)
in shared memory with a pipelined K loop and multiply them with ``T.gemm``
(WGMMA), so each loaded element is reused across a whole tile.

Works for float32, float16 and bfloat16 (fp32 accumulation, output in the
input dtype); cached per (M, N, K, dtype).
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
TILE = 16


def build_matmul(M: int, N: int, K: int, dtype: str = "float32", accum_dtype: str = "float32"):
    """prim_func for C = A @ B, one thread per output element, global loads only."""

    @T.prim_func
    def matmul_naive(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, TILE), T.ceildiv(M, TILE), threads=TILE * TILE) as (bx, by):
            acc = T.alloc_fragment((TILE, TILE), accum_dtype)
            T.clear(acc)
            for k in T.serial(K):
                for i, j in T.Parallel(TILE, TILE):
                    acc[i, j] += T.cast(A[by * TILE + i, k], accum_dtype) * T.cast(B[k, bx * TILE + j], accum_dtype)
            for i, j in T.Parallel(TILE, TILE):
                C[by * TILE + i, bx * TILE + j] = T.cast(acc[i, j], dtype)

    return matmul_naive


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
