"""Matmul candidate (intent: inefficient), written 2026-12-04 before any timing.

Problem: catalogue op ``matmul`` at dtype bfloat16 (m = n = k = 4096), bf16
output.

"Avoid tl.dot to keep full precision": each program computes a 64 x 64 tile of
C as a sum of K rank-1 updates, acc += a[:, k] * b[k, :], in fp32 on the CUDA
cores, loading one column of A (strided) and one row of B per step. No tensor
cores and 4096 dependent steps of tiny loads: expected one to two orders of
magnitude slower than cuBLAS.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _mm_rank1_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mm = rm < M
    nn = rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + rm * sam + k * sak, mask=mm, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + k * sbk + rn * sbn, mask=nn, other=0.0).to(tl.float32)
        acc += a[:, None] * b[None, :]
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=mm[:, None] & nn[None, :])


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        _mm_rank1_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                               C.stride(0), C.stride(1), BLOCK_M=64, BLOCK_N=64, num_warps=4)
        return C
