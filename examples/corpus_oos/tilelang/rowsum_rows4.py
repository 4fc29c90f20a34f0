"""Row-sum candidate in TileLang (intent: efficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/rowsum.py``: sum over the last dim of a
(4096, 8192) fp32 tensor -> (4096,).

Each CTA of 256 threads owns 4 rows. It walks them in (4 x 1024) tiles: each
tile is loaded with T.copy into a register fragment (16 values per thread,
contiguous along the row so the loads vectorize) and added into a (4 x 1024)
fp32 accumulator fragment; one T.reduce_sum along dim 1 at the end gives the
4 row totals. 1024 CTAs, one read of x: should stream at HBM bandwidth.
Shapes whose COLS is not a multiple of 1024 rely on T.copy's bounds checks
(zero fill).
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
ROWS_PER_CTA = 4
CHUNK = 1024
THREADS = 256


def build_rowsum(rows: int, cols: int, dtype: str = "float32"):
    acc_t = "float32"

    @T.prim_func
    def rowsum(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows,), dtype)):
        with T.Kernel(T.ceildiv(rows, ROWS_PER_CTA), threads=THREADS) as bx:
            tile = T.alloc_fragment((ROWS_PER_CTA, CHUNK), dtype)
            acc = T.alloc_fragment((ROWS_PER_CTA, CHUNK), acc_t)
            tot = T.alloc_fragment((ROWS_PER_CTA,), acc_t)
            T.clear(acc)
            for k in T.serial(T.ceildiv(cols, CHUNK)):
                T.copy(X[bx * ROWS_PER_CTA, k * CHUNK], tile)
                for i, j in T.Parallel(ROWS_PER_CTA, CHUNK):
                    acc[i, j] += T.cast(tile[i, j], acc_t)
            T.reduce_sum(acc, tot, dim=1)
            for i in T.Parallel(ROWS_PER_CTA):
                if bx * ROWS_PER_CTA + i < rows:
                    Y[bx * ROWS_PER_CTA + i] = T.cast(tot[i], dtype)

    return rowsum


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def forward(self, x):
        cols = x.shape[-1]
        x2 = x.contiguous().view(-1, cols)
        key = (x2.shape[0], cols, x.dtype)
        if key not in self._kernels:
            self._kernels[key] = tilelang.compile(build_rowsum(x2.shape[0], cols, _TL_DTYPE[x.dtype]), out_idx=[1])
        return self._kernels[key](x2).view(x.shape[:-1])
