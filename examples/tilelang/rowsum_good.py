"""Row-sum candidate in TileLang (good): one CTA per row, wide coalesced chunks, fp32 accumulation.

Each CTA of 256 threads owns one row. It walks the row in CHUNK-wide slices
(2048 elements for 4-byte dtypes, 4096 for 2-byte ones, so every thread moves
32 bytes per slice as vectorized loads), adding each slice element-wise into
a per-thread fp32 fragment. Only after the last slice does one
``T.reduce_sum`` (warp shuffles plus a shared-memory step across warps) turn
that fragment into the row total, which is cast to the input dtype on store.

The loads of a slice do not depend on each other or on the running sum, so
each thread keeps several 16-byte loads in flight and the kernel runs at
memory bandwidth. A ragged tail (N not a multiple of CHUNK) is masked with a
select, reading zero past the end of the row.

Works for float32, float16 and bfloat16 inputs (the bf16 problem included);
the kernel is built and compiled once per (rows, cols, dtype) and cached on
the module.
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
THREADS = 256


def build_rowsum(rows: int, cols: int, dtype: str = "float32"):
    """prim_func summing each row of a (rows, cols) tensor of ``dtype`` into a (rows,) tensor."""
    elem_bytes = 2 if dtype in ("float16", "bfloat16") else 4
    chunk = THREADS * (32 // elem_bytes)
    steps = T.ceildiv(cols, chunk)
    ragged = cols % chunk != 0

    @T.prim_func
    def rowsum(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows,), dtype)):
        with T.Kernel(rows, threads=THREADS) as row:
            acc = T.alloc_fragment((chunk,), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.clear(acc)
            for s in T.serial(steps):
                if ragged:
                    for j in T.Parallel(chunk):
                        acc[j] += T.if_then_else(s * chunk + j < cols,
                                                 T.cast(X[row, s * chunk + j], "float32"), 0.0)
                else:
                    for j in T.Parallel(chunk):
                        acc[j] += T.cast(X[row, s * chunk + j], "float32")
            T.reduce_sum(acc, total, dim=0)
            Y[row] = T.cast(total[0], dtype)

    return rowsum


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def _kernel(self, rows, cols, dtype):
        key = (rows, cols, dtype)
        if key not in self._kernels:
            self._kernels[key] = tilelang.compile(build_rowsum(rows, cols, _TL_DTYPE[dtype]), out_idx=[1])
        return self._kernels[key]

    def forward(self, x):
        cols = x.shape[-1]
        x2 = x.contiguous().view(-1, cols)
        y = self._kernel(x2.shape[0], cols, x.dtype)(x2)
        return y.view(x.shape[:-1])
