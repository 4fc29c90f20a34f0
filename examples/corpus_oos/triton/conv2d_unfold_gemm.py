"""Conv2d candidate (intent: inefficient), written 2026-12-04 before any timing.

Problem: catalogue op ``conv2d`` at dtype float16: y = conv2d(x, w), x (8, 64,
256, 512), w (128, 64, 3, 3), stride 1, no padding, no bias.

Explicit im2col: torch.nn.functional.unfold materializes the (N, C*KH*KW, L)
patch matrix (L = 254 * 510 pixels; 8 * 576 * 129540 * 2 B = 1.2 GB, nine
times the input), then a Triton tl.dot GEMM computes W (Cout x 576) @ cols
for each image and writes y. The GEMM itself is reasonable; writing and
re-reading the 1.2 GB patch matrix is not: expected clearly slower than
cuDNN's implicit-GEMM convolution.
"""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _gemm_batched(w_ptr, cols_ptr, y_ptr, COUT, KDIM, L,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    cols_img = cols_ptr + n * KDIM * L
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, KDIM, BLOCK_K):
        kk = k0 + rk
        a = tl.load(w_ptr + rm[:, None] * KDIM + kk[None, :], mask=(rm[:, None] < COUT) & (kk[None, :] < KDIM),
                    other=0.0)
        b = tl.load(cols_img + kk[:, None].to(tl.int64) * L + rn[None, :], mask=(kk[:, None] < KDIM) & (rn[None, :] < L),
                    other=0.0)
        acc = tl.dot(a, b, acc)
    y_img = y_ptr + n * COUT * L
    tl.store(y_img + rm[:, None].to(tl.int64) * L + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < COUT) & (rn[None, :] < L))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight):
        n, c, h, w = x.shape
        cout, _, kh, kw = weight.shape
        oh, ow = h - kh + 1, w - kw + 1
        cols = F.unfold(x, (kh, kw)).contiguous()  # (n, c*kh*kw, oh*ow)
        w2 = weight.reshape(cout, c * kh * kw).contiguous()
        L = oh * ow
        y = torch.empty((n, cout, L), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(cout, 128), triton.cdiv(L, 128), n)
        _gemm_batched[grid](w2, cols, y, cout, c * kh * kw, L, BLOCK_M=128, BLOCK_N=128, BLOCK_K=32,
                            num_warps=8, num_stages=3)
        return y.view(n, cout, oh, ow)
