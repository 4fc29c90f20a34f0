"""conv2d candidate in TileLang (slow): implicit GEMM on tensor cores, but tiny tiles and no pipelining.

Target: the catalogue op ``conv2d`` at ``--dtype float16`` (default shape
batch=8, in_channels=64, out_channels=128, 256 x 512 image, 3 x 3 kernel;
stride 1, no padding, no dilation, no bias): y = conv2d(x, w) with
x (N, C, H, W), w (F, C, KH, KW), y (N, F, OH, OW), all NCHW.

Design (same formulation as ``conv2d_fast.py``): per image n,
``Y_n[F, OH*OW] = W2[F, K] @ X_col_n[K, OH*OW]`` with K = C*KH*KW, W2 the
weight viewed as (F, K) and the im2col matrix X_col gathered on the fly from x
into shared memory (consecutive threads on consecutive output pixels, rows
k >= K and pixels >= OH*OW read as 0); ``T.gemm`` multiplies the shared tiles
into an fp32 fragment; the result goes through shared memory to y, fp16,
with guarded stores. Numerically it is correct for any shape.

Defect (why it is slow on a GPU): the tiles are 32 (channels) x 32 (pixels)
x 32 (K) for 128 threads, and the K loop is not pipelined
(``T.Pipelined(num_stages=0)``):

- a 32 x 32 tile is too small for Hopper's WGMMA (it needs 64 rows per
  warpgroup), so T.gemm falls back to warp-level mma.sync on 16 x 8 pieces,
  and each gathered x element is reused by only 32 output channels (4x less
  than a 128-channel tile): the default problem needs F/32 = 4 CTAs per pixel
  tile, each re-gathering the same im2col slice, so the load/gather work is
  4x that of ``conv2d_fast.py`` per flop;
- without pipelining every K step waits for its global loads before the
  multiply starts and the tensor cores idle while the next slice is fetched:
  the kernel is latency-bound on the gather, with ~64K small CTAs.

The fix is ``conv2d_fast.py``: 128 x 128 x 32 tiles, 256 threads and
``T.Pipelined(num_stages=3)`` (warp-specialized TMA/gather producer and WGMMA
consumers on sm_90a).

Numerics: fp16 (or bf16) inputs, fp32 accumulation, output in the input dtype
(as F.conv2d returns). The compiled kernel is cached per (shape, dtype).
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}

BLOCK_F = 32      # output channels per CTA (GEMM M)
BLOCK_P = 32      # output pixels per CTA (GEMM N)
BLOCK_K = 32      # reduction slice (c, kh, kw) per K step
NUM_STAGES = 0    # no software pipelining: load, sync, multiply, sync
THREADS = 128


def build_conv2d(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int,
                 dtype: str = "float16", accum_dtype: str = "float32"):
    """prim_func for y (N, F, OH*OW) = conv2d(x (N, C, H, W), w2 (F, C*KH*KW)), stride 1, no padding."""
    OH = H - KH + 1
    OW = W - KW + 1
    P = OH * OW
    K = C * KH * KW
    KK = KH * KW

    @T.prim_func
    def conv2d_igemm(X: T.Tensor((N, C, H, W), dtype),
                     W2: T.Tensor((F, K), dtype),
                     Y: T.Tensor((N, F, P), dtype)):
        with T.Kernel(T.ceildiv(P, BLOCK_P), T.ceildiv(F, BLOCK_F), N, threads=THREADS) as (bp, bf, n):
            w_tile = T.alloc_shared((BLOCK_F, BLOCK_K), dtype)
            x_tile = T.alloc_shared((BLOCK_K, BLOCK_P), dtype)
            acc = T.alloc_fragment((BLOCK_F, BLOCK_P), accum_dtype)
            y_tile = T.alloc_shared((BLOCK_F, BLOCK_P), dtype)

            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=NUM_STAGES):
                T.copy(W2[bf * BLOCK_F, ko * BLOCK_K], w_tile)
                for kk, j in T.Parallel(BLOCK_K, BLOCK_P):
                    k = ko * BLOCK_K + kk          # reduction index: (c, kh, kw)
                    p = bp * BLOCK_P + j           # output pixel: (oh, ow)
                    c = k // KK
                    kh = (k % KK) // KW
                    kw = k % KW
                    oh = p // OW
                    ow = p % OW
                    x_tile[kk, j] = T.if_then_else(
                        (k < K) and (p < P),
                        X[n, c, oh + kh, ow + kw],
                        T.cast(0, dtype),
                    )
                T.gemm(w_tile, x_tile, acc)
            T.copy(acc, y_tile)
            for i, j in T.Parallel(BLOCK_F, BLOCK_P):
                f = bf * BLOCK_F + i
                p = bp * BLOCK_P + j
                if f < F and p < P:
                    Y[n, f, p] = y_tile[i, j]

    return conv2d_igemm


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def forward(self, x, weight):
        N, C, H, W = x.shape
        F, _, KH, KW = weight.shape
        key = (N, C, H, W, F, KH, KW, x.dtype)
        if key not in self._kernels:
            prim = build_conv2d(N, C, H, W, F, KH, KW, _TL_DTYPE[x.dtype])
            self._kernels[key] = tilelang.compile(prim, out_idx=[2])
        w2 = weight.contiguous().view(F, C * KH * KW)   # free view of the contiguous weight
        y = self._kernels[key](x.contiguous(), w2)
        return y.view(N, F, H - KH + 1, W - KW + 1)
