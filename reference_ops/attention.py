"""Scaled dot-product attention through PyTorch's SDPA (flash, memory-efficient or cuDNN kernels).

Inputs are q, k, v of shape ``(batch, heads, seq, head_dim)``, the scale is ``1/sqrt(head_dim)``.

F: the two products ``Q K^T`` and ``P V`` cost ``2 * S * S * D`` each per (batch, head), so
``4 * B * H * S^2 * D``; the softmax adds a nominal 5 per score (``5 * B * H * S^2``). A causal
mask halves both: the ``S(S+1)/2`` scores that are computed are counted as ``S^2 / 2``.
``torch.utils.flop_counter`` counts the two products only, and the full ``S^2`` even when causal.
B reads q, k and v once and writes the output once: ``4 * B * H * S * D`` elements.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._registry import reference_op

ATTENTION_DTYPES = ("float32", "float16", "bfloat16")
ATTENTION_DEFAULT = {"batch": 16, "heads": 16, "seq": 2048, "head_dim": 128}
ATTENTION_SMOKE = {"batch": 1, "heads": 2, "seq": 16, "head_dim": 8}


def _qkv(s) -> list[tuple[int, ...]]:
    shape = (s["batch"], s["heads"], s["seq"], s["head_dim"])
    return [shape, shape, shape]


def _scores(s) -> float:
    return 1.0 * s["batch"] * s["heads"] * s["seq"] * s["seq"]


def _bytes(s, e) -> float:
    # read q, k, v; write o: four (batch, heads, seq, head_dim) tensors
    return 4.0 * s["batch"] * s["heads"] * s["seq"] * s["head_dim"] * e


@reference_op(
    name="sdpa", category="attention",
    input_shapes=_qkv,
    # Q K^T and P V: 2 * S * S * D each per (batch, head); softmax: 5 per score
    flops=lambda s: 4.0 * _scores(s) * s["head_dim"] + 5.0 * _scores(s),
    bytes_compulsory=_bytes,
    default_shape=dict(ATTENTION_DEFAULT), smoke_shape=dict(ATTENTION_SMOKE),
    dtypes=ATTENTION_DTYPES,
    matmul_like=True,
    kernelbench_level1=(97,),
)
def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


@reference_op(
    name="sdpa_causal", category="attention",
    input_shapes=_qkv,
    # half of sdpa's: only the scores on or below the diagonal are computed
    flops=lambda s: (4.0 * _scores(s) * s["head_dim"] + 5.0 * _scores(s)) / 2,
    bytes_compulsory=_bytes,
    default_shape=dict(ATTENTION_DEFAULT), smoke_shape=dict(ATTENTION_SMOKE),
    dtypes=ATTENTION_DTYPES,
    matmul_like=True,
)
def sdpa_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention: query i attends to keys 0..i."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
