"""Matmul candidate (deliberately naive): correct, but slow.

Defect: one program per output element C[m, n]. Each program loops over K in
BLOCK_K=32 slices, loading 32 values of row m of A and 32 values of column n
of B and accumulating tl.sum(a * b) into a scalar. No tl.dot, so no tensor
cores and no register/shared-memory tiling.

Why it is slow on a GPU: every element of A and B is re-read from memory N
(resp. M) times (arithmetic intensity ~0.25 FLOP/byte instead of ~tens), the
B column loads are strided by N (uncoalesced: 32 separate cache lines per
slice), each slice ends in a cross-lane reduction, and M*N = 16.7M tiny
one-warp programs pay launch/scheduling overhead for 2*K FLOPs each.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_naive_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                         stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                         BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    m = pid // N
    n = pid % N
    rk = tl.arange(0, BLOCK_K)
    acc = 0.0
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        mask = ks < K
        a = tl.load(a_ptr + m * stride_am + ks * stride_ak, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + ks * stride_bk + n * stride_bn, mask=mask, other=0.0).to(tl.float32)
        acc += tl.sum(a * b, axis=0)
    tl.store(c_ptr + m * stride_cm + n * stride_cn, acc.to(c_ptr.dtype.element_ty))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        _matmul_naive_kernel[(M * N,)](A, B, C, M, N, K,
                                       A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                                       C.stride(0), C.stride(1), BLOCK_K=32, num_warps=1)
        return C
