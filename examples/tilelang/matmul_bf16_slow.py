"""matmul candidate in TileLang (slow, bf16): tensor cores, but tiny tiles, no pipelining, no swizzle.

Target: the catalogue op ``matmul`` at ``--dtype bfloat16`` (default
m = n = k = 4096): C = A @ B with A (M, K) and B (K, N), both row-major,
output in bf16 (what torch.matmul returns).

Design: the textbook shared-memory GEMM. Each CTA of 128 threads computes a
32 x 32 tile of C: for each 32-wide K slice it copies the A and B tiles into
shared memory with ``T.copy``, multiplies them with ``T.gemm`` into an fp32
fragment, and finally stages the tile through shared memory to C. TileLang's
copies predicate loads (zero fill past M, N, K) and stores, so any shape is
handled; the compiled kernel is cached per (M, N, K, dtype). Numerically it
is fine (bf16 inputs, fp32 accumulation).

Defect (why it is slow on a GPU), all in the tiling parameters:

- 32 x 32 x 32 tiles: a K slice brings 4 KiB into shared memory for only
  64 KFLOP, 16 flops per loaded byte (a 128 x 256 x 64 tile does 85), so the
  kernel is bound by shared-memory and L2 bandwidth long before the tensor
  cores; the tile is also below Hopper's WGMMA granule (64 rows per
  warpgroup), so T.gemm falls back to warp-level mma.sync (16 x 8 x 16);
- ``T.Pipelined(num_stages=0)``: no multi-buffering, so each K step waits for
  its loads, then the multiply, with a block-wide barrier in between; the
  load latency is exposed on every one of the K/32 steps and hidden only by
  the other resident CTAs;
- no ``T.use_swizzle``: the 16K CTAs of the default problem are launched in
  row-major tile order, so CTAs resident together share almost no B columns
  and B is re-streamed from L2/HBM for every tile row.

The fix is ``matmul_bf16_fast.py``: 128 x 256 x 64 tiles for two warpgroups
(WGMMA), ``T.Pipelined(num_stages=4)`` (TMA producer warp specialization)
and ``T.use_swizzle(panel_size=8)``.
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float16: "float16", torch.bfloat16: "bfloat16"}

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32
NUM_STAGES = 0
THREADS = 128


def build_matmul(M: int, N: int, K: int, dtype: str = "bfloat16", accum_dtype: str = "float32"):
    """prim_func for C (M, N) = A (M, K) @ B (K, N), 16-bit inputs and output, fp32 accumulation."""

    @T.prim_func
    def matmul_bf16_small(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), T.ceildiv(M, BLOCK_M), threads=THREADS) as (bx, by):
            a_s = T.alloc_shared((BLOCK_M, BLOCK_K), dtype)
            b_s = T.alloc_shared((BLOCK_K, BLOCK_N), dtype)
            acc = T.alloc_fragment((BLOCK_M, BLOCK_N), accum_dtype)
            c_s = T.alloc_shared((BLOCK_M, BLOCK_N), dtype)

            T.clear(acc)
            for kt in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=NUM_STAGES):
                T.copy(A[by * BLOCK_M, kt * BLOCK_K], a_s)
                T.copy(B[kt * BLOCK_K, bx * BLOCK_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, c_s)
            T.copy(c_s, C[by * BLOCK_M, bx * BLOCK_N])

    return matmul_bf16_small


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
