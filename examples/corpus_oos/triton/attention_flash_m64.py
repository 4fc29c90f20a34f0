"""SDPA candidate (intent: efficient), written 2026-12-04 before any timing.

Problem: catalogue op ``sdpa`` at dtype float16: o = softmax(q k^T / sqrt(d)) v,
non-causal, q, k, v (16, 16, 2048, 128).

A flash-attention forward in the style of the Triton tutorial: grid
(seq / 64, batch * heads), a 64 x 128 query tile held in registers, K and V
streamed in 64-key tiles with an online softmax (running max, rescaled sum and
accumulator in fp32, p cast to fp16 for the P V product), 4 warps, 3 stages.
Scores never leave the SM. Expected within ~20% of the library's flash kernel
(smaller tiles than the best configurations, but ample parallelism: 8192
programs).
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, S, sm_scale,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, S, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=cols[None, :] < S, other=0.0)
        qk = tl.dot(q, k) * sm_scale
        qk = tl.where(cols[None, :] < S, qk, -float("inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_ij[:, None])
        alpha = tl.exp(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptr + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None] < S, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=offs_m[:, None] < S)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        B, H, S, D = q.shape
        if D not in (16, 32, 64, 128):
            raise ValueError(f"attention_flash_m64: head_dim {D} not supported")
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        o = torch.empty_like(q)
        grid = (triton.cdiv(S, 64), B * H)
        _attn_fwd[grid](q, k, v, o, S, 1.0 / math.sqrt(D), BLOCK_M=64, BLOCK_N=64, HEAD_DIM=D,
                        num_warps=4, num_stages=3)
        return o
