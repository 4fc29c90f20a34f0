"""Matmul candidate in TileLang (good): shared-memory tiles, pipelined K loop, tensor-core T.gemm.

C = A @ B with A (M, K) and B (K, N), both row-major. Each CTA computes one
BLOCK_M x BLOCK_N tile of C with 256 compute threads (two warpgroups); the
tiles are 128 x 256 x 64 for fp16/bf16 and 128 x 128 x 32 for fp32 (same
bytes per K slice):

- the K loop runs in BLOCK_K-wide slices under ``T.Pipelined(num_stages=3)``:
  TileLang issues the global->shared copies of the A and B slices for later
  stages while the current one is being multiplied (on sm_90a it lowers to a
  TMA producer warpgroup and mbarriers, i.e. warp specialization);
- ``T.gemm`` multiplies the two shared tiles on tensor cores (WGMMA on
  sm_90a) into a BLOCK_M x BLOCK_N fp32 register fragment;
- the fragment goes through shared memory to C, cast to C's dtype, so the
  global stores are wide and coalesced;
- ``T.use_swizzle`` walks the CTAs in panels so tiles that share A rows or B
  columns run close together in time and hit L2.

Numerics: fp16/bf16 inputs, fp32 accumulation, output in the input dtype
(what torch.matmul returns). Its target problem is
``examples/problems/matmul_fp16.py``.

On float32 inputs the same kernel is built with fp32 tiles and no casts, but
T.gemm on fp32 operands runs the tensor cores in TF32 (10-bit mantissa
operands, fp32 accumulation): faster than strict fp32 but not fp32
arithmetic. kernelgate holds an fp32 problem to fp32 accuracy, so on
``examples/problems/matmul.py`` this is a precision downgrade and a reject
(on the H200, 2026-12-02: error 3.6x the tolerance, cuBLAS's fp32 at 0.02x).

Tile boundaries are handled by TileLang's copies (guarded loads and stores),
so shapes need not be multiples of the tile; the compiled kernel is cached
per (M, N, K, dtype).
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}

CONFIGS = {
    # dtype: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, threads)
    "float16": (128, 256, 64, 3, 256),
    "bfloat16": (128, 256, 64, 3, 256),
    "float32": (128, 128, 32, 3, 256),
}


def build_matmul(M: int, N: int, K: int, dtype: str = "float16", accum_dtype: str = "float32"):
    """prim_func for C (M, N) = A (M, K) @ B (K, N), inputs and output in ``dtype``."""
    BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, THREADS = CONFIGS[dtype]

    @T.prim_func
    def matmul(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), T.ceildiv(M, BLOCK_M), threads=THREADS) as (bx, by):
            A_tile = T.alloc_shared((BLOCK_M, BLOCK_K), dtype)
            B_tile = T.alloc_shared((BLOCK_K, BLOCK_N), dtype)
            C_acc = T.alloc_fragment((BLOCK_M, BLOCK_N), accum_dtype)
            C_tile = T.alloc_shared((BLOCK_M, BLOCK_N), dtype)

            T.use_swizzle(panel_size=8)
            T.clear(C_acc)
            for ko in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=NUM_STAGES):
                T.copy(A[by * BLOCK_M, ko * BLOCK_K], A_tile)
                T.copy(B[ko * BLOCK_K, bx * BLOCK_N], B_tile)
                T.gemm(A_tile, B_tile, C_acc)
            T.copy(C_acc, C_tile)
            T.copy(C_tile, C[by * BLOCK_M, bx * BLOCK_N])

    return matmul


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
