"""Row-sum candidate in TileLang (deliberately bad): correct, but slow.

Defect: one *thread* per row. A CTA of 128 threads takes 128 rows, and each
thread walks its whole row with a serial ``T.serial`` loop, adding one
element at a time into a private fp32 accumulator:

- the reduction is serial: 8192 dependent adds per row instead of a tree;
- the loads are uncoalesced: the 32 lanes of a warp read 32 different rows
  (addresses 32 KB apart for fp32), so every warp-wide load touches 32
  separate sectors and no load is vectorized;
- there is too little parallelism: (4096, 8192) gives 4096 threads in all,
  32 CTAs on a 132-SM GPU, so most SMs sit idle and the few busy warps cannot
  keep enough bytes in flight to cover DRAM latency.

It runs orders of magnitude below memory bandwidth. The fix is the layout of
``rowsum_good.py``: a CTA per row, threads striding across the row with wide
contiguous loads into a per-thread fragment, and one ``T.reduce_sum`` at the
end. Accumulation is fp32 for every input dtype (float32, float16, bfloat16).
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
ROWS_PER_CTA = 128


def build_rowsum(rows: int, cols: int, dtype: str = "float32"):
    """prim_func summing each row of a (rows, cols) tensor, one thread per row."""

    @T.prim_func
    def rowsum_serial(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows,), dtype)):
        with T.Kernel(T.ceildiv(rows, ROWS_PER_CTA), threads=ROWS_PER_CTA) as bx:
            tx = T.get_thread_binding()
            row = bx * ROWS_PER_CTA + tx
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            if row < rows:
                for j in T.serial(cols):
                    acc[0] += T.cast(X[row, j], "float32")
                Y[row] = T.cast(acc[0], dtype)

    return rowsum_serial


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
        y = self._kernels[key](x2)
        return y.view(x.shape[:-1])
