"""RMSNorm candidate in TileLang (good): one CTA per row, the row held in registers.

y = x * rsqrt(mean(x^2, -1) + eps) * weight over the last dim, for
``examples/problems/rmsnorm.py`` ((4096, 4096) fp32, learnable weight).

Each CTA of 256 threads owns one row. For rows of up to 8192 elements the
row is read once from global memory into a per-thread fp32 register fragment
(16 values per thread at HIDDEN = 4096, loaded as contiguous 16-byte
vectors), squared and reduced with one ``T.reduce_sum`` (warp shuffles plus a
shared-memory step across warps); the same registers are then scaled and
multiplied by the weight and written out. DRAM traffic is one read and one
write of x, which is the floor for this op.

Longer rows fall back to a chunked two-pass form (sum of squares over
4096-wide slices into an fp32 fragment, then a second pass that rescales),
whose second read mostly hits L2.

Statistics are accumulated in fp32 whatever the input dtype; the output
dtype is the one torch would produce for ``x * ... * weight`` (the promoted
dtype of x and the weight). The kernel is compiled once per
(rows, hidden, dtypes) and cached on the module.
"""
import torch
import tilelang
import tilelang.language as T

_TL_DTYPE = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
THREADS = 256
MAX_RESIDENT = 8192
CHUNK = 4096


def build_rmsnorm(rows: int, hidden: int, eps: float = 1e-6, dtype: str = "float32",
                  w_dtype: str = "float32", out_dtype: str = "float32"):
    """prim_func for Y (rows, hidden) = RMSNorm(X) * W, W of shape (hidden,)."""
    acc = "float32"
    inv_n = 1.0 / hidden

    if hidden <= MAX_RESIDENT:
        padded = T.ceildiv(hidden, THREADS) * THREADS  # fragment length the 256 threads can share evenly

        @T.prim_func
        def rmsnorm(X: T.Tensor((rows, hidden), dtype), W: T.Tensor((hidden,), w_dtype),
                    Y: T.Tensor((rows, hidden), out_dtype)):
            with T.Kernel(rows, threads=THREADS) as row:
                xf = T.alloc_fragment((padded,), acc)
                sq = T.alloc_fragment((padded,), acc)
                ss = T.alloc_fragment((1,), acc)
                for j in T.Parallel(padded):
                    xf[j] = T.if_then_else(j < hidden, T.cast(X[row, j], acc), 0.0)
                for j in T.Parallel(padded):
                    sq[j] = xf[j] * xf[j]
                T.reduce_sum(sq, ss, dim=0)
                ss[0] = T.rsqrt(ss[0] * inv_n + eps)
                for j in T.Parallel(padded):
                    if j < hidden:
                        Y[row, j] = T.cast(xf[j] * ss[0] * T.cast(W[j], acc), out_dtype)

        return rmsnorm

    steps = T.ceildiv(hidden, CHUNK)

    @T.prim_func
    def rmsnorm_chunked(X: T.Tensor((rows, hidden), dtype), W: T.Tensor((hidden,), w_dtype),
                        Y: T.Tensor((rows, hidden), out_dtype)):
        with T.Kernel(rows, threads=THREADS) as row:
            sq = T.alloc_fragment((CHUNK,), acc)
            ss = T.alloc_fragment((1,), acc)
            T.clear(sq)
            for s in T.serial(steps):
                for j in T.Parallel(CHUNK):
                    sq[j] += T.if_then_else(s * CHUNK + j < hidden,
                                            T.cast(X[row, s * CHUNK + j], acc) * T.cast(X[row, s * CHUNK + j], acc),
                                            0.0)
            T.reduce_sum(sq, ss, dim=0)
            ss[0] = T.rsqrt(ss[0] * inv_n + eps)
            for s in T.serial(steps):
                for j in T.Parallel(CHUNK):
                    if s * CHUNK + j < hidden:
                        Y[row, s * CHUNK + j] = T.cast(
                            T.cast(X[row, s * CHUNK + j], acc) * ss[0] * T.cast(W[s * CHUNK + j], acc), out_dtype)

    return rmsnorm_chunked


class ModelNew(torch.nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.eps = eps
        self._kernels = {}

    def forward(self, x):
        hidden = self.weight.numel()
        x2 = x.contiguous().view(-1, hidden)
        out_dtype = torch.promote_types(x.dtype, self.weight.dtype)
        key = (x2.shape[0], hidden, x.dtype, self.weight.dtype)
        if key not in self._kernels:
            func = build_rmsnorm(x2.shape[0], hidden, self.eps, _TL_DTYPE[x.dtype],
                                 _TL_DTYPE[self.weight.dtype], _TL_DTYPE[out_dtype])
            self._kernels[key] = tilelang.compile(func, out_idx=[2])
        y = self._kernels[key](x2, self.weight.contiguous())
        return y.view(x.shape)
