"""Softmax candidate in TileLang (deliberately slow): one warp per row, a contiguous chunk per thread.

For ``examples/problems/softmax.py``: torch.softmax(x, dim=-1) over a
(ROWS, COLS) = (4096, 8192) fp32 tensor.

Design: one CTA of 32 threads per row. The row is cut into 32 contiguous
chunks of ceil(COLS / 32) elements (256 at COLS = 8192) and thread t walks
chunk t with a ``T.serial`` loop, one scalar element at a time, in three
passes over global memory:
  1. the running max of its chunk, in a private fp32 register;
  2. the sum of exp(x - row_max) over its chunk;
  3. exp(x - row_max) / row_sum written to its chunk of the output.
After passes 1 and 2 the 32 per-thread partials go through a 32-entry
shared-memory array, and every thread combines all 32 of them with another
serial loop. Past the end of the row (COLS not a multiple of 32) a thread
skips the element, so any COLS >= 1 is handled.

Defect: the work split. Giving each thread a contiguous chunk looks
cache-friendly, but on a GPU the 32 lanes of a warp then read addresses a
whole chunk apart (1 KB at COLS = 8192): every warp-wide load touches 32
different cache lines and needs 32 L1 wavefronts to deliver 128 useful
bytes, nothing is vectorized, and the per-thread reductions are serial
chains. With a single warp per CTA there is also little to hide latency
with, and the row is read three times (plus one write) instead of once.
The fix (``softmax_fast.py``): let consecutive threads take consecutive
elements (a fragment over the row in a wide CTA), keep the row in registers
and use ``T.reduce_max`` / ``T.reduce_sum``: one read and one write.
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
THREADS = 32


def build_softmax(rows: int, n: int, dtype: str = "float32"):
    """prim_func for Y (rows, n) = softmax(X, dim=-1), one 32-thread CTA per row."""
    acc = "float32"
    chunk = (n + THREADS - 1) // THREADS  # contiguous columns per thread

    @T.prim_func
    def softmax_chunked(X: T.Tensor((rows, n), dtype), Y: T.Tensor((rows, n), dtype)):
        with T.Kernel(rows, threads=THREADS) as row:
            tx = T.get_thread_binding()
            part = T.alloc_shared((THREADS,), acc)
            m = T.alloc_local((1,), acc)
            s = T.alloc_local((1,), acc)
            start = tx * chunk

            # pass 1: max of this thread's chunk, then of the row
            m[0] = -T.infinity(acc)
            for k in T.serial(chunk):
                if start + k < n:
                    m[0] = T.max(m[0], T.cast(X[row, start + k], acc))
            part[tx] = m[0]
            T.sync_threads()
            m[0] = part[0]
            for t in T.serial(THREADS - 1):
                m[0] = T.max(m[0], part[t + 1])
            T.sync_threads()  # every thread has read part before it is reused

            # pass 2: sum of exp(x - max) over the chunk, then over the row
            s[0] = 0.0
            for k in T.serial(chunk):
                if start + k < n:
                    s[0] += T.exp(T.cast(X[row, start + k], acc) - m[0])
            part[tx] = s[0]
            T.sync_threads()
            s[0] = 0.0
            for t in T.serial(THREADS):
                s[0] += part[t]

            # pass 3: normalize
            for k in T.serial(chunk):
                if start + k < n:
                    Y[row, start + k] = T.cast(T.exp(T.cast(X[row, start + k], acc) - m[0]) / s[0], dtype)

    return softmax_chunked


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
        y = self._kernels[key](x2)
        return y.view(x.shape)
