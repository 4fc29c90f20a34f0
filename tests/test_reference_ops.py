"""Tests for the reference-op catalogue: cost models against hand counts, references on small CPU inputs."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from kernelgate.hardware import MathMode
from kernelgate.reference_ops import DTYPES, get_op, list_ops

F32 = 4  # bytes per fp32 element

# Hand counts at each op's default shape: (default shape, flops, compulsory bytes in fp32).
R, C = 4096, 4096
SR, SC = 4096, 8192
M = N = K = 4096
HAND = {
    "layernorm": ({"rows": R, "cols": C}, 5 * R * C, (2 * R * C + 2 * C) * F32),
    "softmax": ({"rows": SR, "cols": SC}, 5 * SR * SC, 2 * SR * SC * F32),
    "rowsum": ({"rows": SR, "cols": SC}, SR * SC, (SR * SC + SR) * F32),
    "matmul": ({"m": M, "n": N, "k": K}, 2 * M * N * K, (M * K + K * N + M * N) * F32),
}

# Small shapes for running on the CPU, and the output shape each reference must give.
SMALL = {
    "layernorm": ({"rows": 8, "cols": 32}, (8, 32)),
    "softmax": ({"rows": 4, "cols": 64}, (4, 64)),
    "rowsum": ({"rows": 5, "cols": 48}, (5,)),
    "matmul": ({"m": 8, "n": 16, "k": 32}, (8, 16)),
}

OPS = list_ops()
IDS = [op.name for op in OPS]


def test_catalogue_is_listed_sorted_and_nonempty():
    assert IDS == sorted(IDS)
    assert {"layernorm", "softmax", "rowsum", "matmul"} <= set(IDS)


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_every_op_has_a_hand_count(op):
    assert op.name in HAND, f"add a hand count for {op.name} to this test"
    assert op.name in SMALL, f"add a small CPU shape for {op.name} to this test"


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_cost_at_default_shape_matches_hand_count(op):
    if op.name not in HAND:
        pytest.skip("no hand count (test_every_op_has_a_hand_count fails)")
    shape, flops, nbytes = HAND[op.name]
    assert op.default_shape == shape
    assert op.shape() == shape
    assert op.flops(op.shape()) == flops
    assert op.bytes_compulsory(op.shape(), F32) == nbytes


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_bytes_scale_with_element_size(op):
    s = op.shape()
    assert op.bytes_compulsory(s, 2) == pytest.approx(op.bytes_compulsory(s, 4) / 2)


def test_cost_at_overridden_shape():
    ln = get_op("layernorm")
    s = ln.shape({"rows": 3})
    assert s == {"rows": 3, "cols": 4096}
    assert ln.flops(s) == 5 * 3 * 4096
    assert ln.bytes_compulsory(s, 2) == (2 * 3 * 4096 + 2 * 4096) * 2
    mm = get_op("matmul")
    s = mm.shape({"m": 10, "n": 20, "k": 30})
    assert mm.flops(s) == 2 * 10 * 20 * 30
    assert mm.bytes_compulsory(s, 4) == (10 * 30 + 30 * 20 + 10 * 20) * 4


@pytest.mark.parametrize("m,n,k", [(8, 16, 32), (3, 5, 7), (64, 1, 128)])
def test_matmul_flops_agree_with_torch_flop_counter(m, n, k):
    op = get_op("matmul")
    shape = op.shape({"m": m, "n": n, "k": k})
    a, b = (torch.randn(*s) for s in op.input_shapes(shape))
    with FlopCounterMode(display=False) as counter:
        out = op.reference(a, b)
    assert out.shape == (m, n)
    assert counter.get_total_flops() == op.flops(shape) == 2 * m * n * k


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_reference_runs_on_small_cpu_inputs(op):
    if op.name not in SMALL:
        pytest.skip("no small shape (test_every_op_has_a_hand_count fails)")
    shape_params, out_shape = SMALL[op.name]
    shape = op.shape(shape_params)
    torch.manual_seed(0)
    inputs = [torch.randn(*s, dtype=DTYPES[op.default_dtype]) for s in op.input_shapes(shape)]
    out = op.reference(*inputs)
    assert isinstance(out, torch.Tensor)
    assert tuple(out.shape) == out_shape
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_reference_values_on_small_inputs():
    torch.manual_seed(0)
    x = torch.randn(4, 16, dtype=torch.float64)
    w, b = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    torch.testing.assert_close(get_op("layernorm").reference(x, w, b), (x - mean) / torch.sqrt(var + 1e-5) * w + b)
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    torch.testing.assert_close(get_op("softmax").reference(x), e / e.sum(-1, keepdim=True))
    torch.testing.assert_close(get_op("rowsum").reference(x), x.sum(-1))
    y = torch.randn(16, 3, dtype=torch.float64)
    torch.testing.assert_close(get_op("matmul").reference(x, y), x @ y)


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_shape_rejects_unknown_keys(op):
    with pytest.raises(KeyError, match="no shape parameter bogus"):
        op.shape({"bogus": 3})
    with pytest.raises(KeyError):
        op.shape({**op.default_shape, "also_bogus": 1})


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_shape_does_not_mutate_defaults(op):
    before = dict(op.default_shape)
    key = next(iter(before))
    assert op.shape({key: 7})[key] == 7
    assert op.default_shape == before


def test_get_op_unknown_raises_key_error():
    with pytest.raises(KeyError, match="unknown reference op 'no_such_op'"):
        get_op("no_such_op")
    with pytest.raises(KeyError):
        get_op("LayerNorm")  # names are exact


def test_get_op_returns_listed_entries():
    for op in OPS:
        assert get_op(op.name) is op


def test_math_and_peak_modes():
    mm, ln = get_op("matmul"), get_op("layernorm")
    assert mm.matmul_like and not ln.matmul_like
    assert mm.math_mode("float32") is MathMode.fp32
    assert mm.peak_mode("float32") is MathMode.tf32  # fp32 GEMM may run on TF32 tensor cores
    assert ln.peak_mode("float32") is MathMode.fp32
    assert mm.peak_mode("float16") is MathMode.fp16
    assert ln.math_mode("bfloat16") is MathMode.bf16
