"""SDPA candidate (intent: inefficient), written 2026-12-04 before any timing.

Problem: catalogue op ``sdpa`` at dtype float16: o = softmax(q k^T / sqrt(d)) v,
non-causal, q, k, v (16, 16, 2048, 128).

The textbook two-kernel version: kernel 1 computes the full score matrix
S = q k^T * scale with tl.dot tiles and writes it to HBM in fp32
(16 * 16 * 2048 * 2048 * 4 B = 4.3 GB); kernel 2, per 64-query tile, reads its
rows of S twice (row max and sum, then p = exp(S - max) / sum) and multiplies
p by v with tl.dot. Roughly 13 GB of extra DRAM traffic against a flash
kernel's few hundred MB: expected several times slower than the library's
flash attention.
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _scores_kernel(q_ptr, k_ptr, s_ptr, S, D, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    bh = tl.program_id(2).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    d = tl.arange(0, BLOCK_D)
    q = tl.load(q_ptr + bh * S * D + rm[:, None] * D + d[None, :], mask=(rm[:, None] < S) & (d[None, :] < D),
                other=0.0)
    kt = tl.load(k_ptr + bh * S * D + rn[None, :] * D + d[:, None], mask=(rn[None, :] < S) & (d[:, None] < D),
                 other=0.0)
    s = tl.dot(q, kt) * scale
    tl.store(s_ptr + bh * S * S + rm[:, None] * S + rn[None, :], s, mask=(rm[:, None] < S) & (rn[None, :] < S))


@triton.jit
def _softmax_pv_kernel(s_ptr, v_ptr, o_ptr, S, D, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = rm < S
    d = tl.arange(0, BLOCK_D)
    rn0 = tl.arange(0, BLOCK_N)
    s_rows = s_ptr + bh * S * S + rm[:, None] * S
    row_max = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    for start in range(0, S, BLOCK_N):
        rn = start + rn0
        s = tl.load(s_rows + rn[None, :], mask=m_ok[:, None] & (rn[None, :] < S), other=-float("inf"))
        row_max = tl.maximum(row_max, tl.max(s, axis=1))
    row_max = tl.where(m_ok, row_max, 0.0)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for start in range(0, S, BLOCK_N):
        rn = start + rn0
        s = tl.load(s_rows + rn[None, :], mask=m_ok[:, None] & (rn[None, :] < S), other=-float("inf"))
        p = tl.exp(s - row_max[:, None])
        row_sum += tl.sum(p, axis=1)
        v = tl.load(v_ptr + bh * S * D + rn[:, None] * D + d[None, :], mask=(rn[:, None] < S) & (d[None, :] < D),
                    other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
    o = acc / tl.where(m_ok, row_sum, 1.0)[:, None]
    tl.store(o_ptr + bh * S * D + rm[:, None] * D + d[None, :], o.to(o_ptr.dtype.element_ty),
             mask=m_ok[:, None] & (d[None, :] < D))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        B, H, S, D = q.shape
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        scores = torch.empty((B * H, S, S), device=q.device, dtype=torch.float32)
        o = torch.empty_like(q)
        bd = max(16, triton.next_power_of_2(D))
        _scores_kernel[(triton.cdiv(S, 64), triton.cdiv(S, 64), B * H)](q, k, scores, S, D, 1.0 / math.sqrt(D),
                                                                         BLOCK_M=64, BLOCK_N=64, BLOCK_D=bd,
                                                                         num_warps=4)
        _softmax_pv_kernel[(triton.cdiv(S, 64), B * H)](scores, v, o, S, D, BLOCK_M=64, BLOCK_N=64, BLOCK_D=bd,
                                                        num_warps=4)
        return o
