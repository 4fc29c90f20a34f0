"""Tests for the reference-op catalogue: cost models against hand counts and FlopCounterMode,
references against independent formulas on small CPU inputs, inputs per distribution, the
tolerance and math-mode plumbing into a built problem, integer outputs in numerics, the generic
cost model, and ``kernelgate ops``.

The tests are generated from the registry: an op without a hand count, an independent formula
or (for matmul-like ops) a FlopCounterMode count fails until one is added here.
"""

from __future__ import annotations

import importlib
import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from kernelgate.cli import main
from kernelgate.hardware import MathMode
from kernelgate.models import Problem, Reason
from kernelgate.numerics import TOLERANCES, Tolerance, check_trial_output, normalized_error
from kernelgate.problems import DISTRIBUTIONS, BuiltProblem, build_problem
from kernelgate.reference_ops import CATEGORY_MODULES, DTYPES, get_op, list_ops, reference_op

F32, F16 = 4, 2  # bytes per element

# Hand counts at small shapes: name -> (shape, output shape, F, B in fp32, B in fp16).
HAND = {
    # --- gemm: 2*M*N*K; B = A + B + C
    "matmul": ({"m": 8, "n": 16, "k": 32}, (8, 16), 2 * 8 * 16 * 32,
               (8 * 32 + 32 * 16 + 8 * 16) * F32, (8 * 32 + 32 * 16 + 8 * 16) * F16),
    "matmul_tall_skinny": ({"m": 64, "n": 2, "k": 16}, (64, 2), 2 * 64 * 2 * 16,
                           (64 * 16 + 16 * 2 + 64 * 2) * F32, (64 * 16 + 16 * 2 + 64 * 2) * F16),
    "bmm": ({"batch": 3, "m": 8, "n": 12, "k": 16}, (3, 8, 12), 2 * 3 * 8 * 12 * 16,
            3 * (8 * 16 + 16 * 12 + 8 * 12) * F32, 3 * (8 * 16 + 16 * 12 + 8 * 12) * F16),
    # linear: 2*batch*out*in + batch*out bias adds; B = x + W + b + y
    "linear": ({"batch": 16, "in_features": 32, "out_features": 24}, (16, 24), 2 * 16 * 24 * 32 + 16 * 24,
               (16 * 32 + 24 * 32 + 24 + 16 * 24) * F32, (16 * 32 + 24 * 32 + 24 + 16 * 24) * F16),
    "matmul_tf32": ({"m": 8, "n": 16, "k": 32}, (8, 16), 8192, 3584, 1792),
    # --- convolution (stride 1, no padding): outputs shrink by k - 1, transposed ones grow by k - 1
    "conv1d": ({"batch": 2, "in_channels": 4, "out_channels": 6, "length": 32, "kernel_size": 3}, (2, 6, 30),
               2 * 2 * 6 * 30 * 4 * 3, (2 * 4 * 32 + 6 * 4 * 3 + 2 * 6 * 30) * F32,
               (2 * 4 * 32 + 6 * 4 * 3 + 2 * 6 * 30) * F16),
    "conv2d": ({"batch": 2, "in_channels": 3, "out_channels": 4, "height": 10, "width": 12, "kernel_h": 3,
                "kernel_w": 2}, (2, 4, 8, 11), 2 * 2 * 4 * 8 * 11 * 3 * 3 * 2,
               (2 * 3 * 10 * 12 + 4 * 3 * 3 * 2 + 2 * 4 * 8 * 11) * F32, 1496 * F16),
    "conv3d": ({"batch": 1, "in_channels": 2, "out_channels": 3, "depth": 5, "height": 6, "width": 7,
                "kernel_d": 3, "kernel_h": 3, "kernel_w": 3}, (1, 3, 3, 4, 5), 2 * 3 * (3 * 4 * 5) * 2 * 27,
               (2 * 5 * 6 * 7 + 3 * 2 * 27 + 3 * 3 * 4 * 5) * F32, 762 * F16),
    "conv_depthwise2d": ({"batch": 2, "channels": 4, "height": 10, "width": 12, "kernel_h": 3, "kernel_w": 3},
                         (2, 4, 8, 10), 2 * 2 * 4 * 8 * 10 * 3 * 3,
                         (2 * 4 * 10 * 12 + 4 * 3 * 3 + 2 * 4 * 8 * 10) * F32, 1636 * F16),
    "conv_transpose1d": ({"batch": 2, "in_channels": 4, "out_channels": 6, "length": 16, "kernel_size": 3},
                         (2, 6, 18), 2 * 2 * 4 * 16 * 6 * 3, (2 * 4 * 16 + 4 * 6 * 3 + 2 * 6 * 18) * F32,
                         416 * F16),
    "conv_transpose2d": ({"batch": 2, "in_channels": 3, "out_channels": 4, "height": 6, "width": 7,
                          "kernel_h": 3, "kernel_w": 2}, (2, 4, 8, 8), 2 * 2 * 3 * 6 * 7 * 4 * 3 * 2,
                         (2 * 3 * 6 * 7 + 3 * 4 * 3 * 2 + 2 * 4 * 8 * 8) * F32, 836 * F16),
    "conv_transpose3d": ({"batch": 1, "in_channels": 2, "out_channels": 3, "depth": 4, "height": 5, "width": 6,
                          "kernel_d": 3, "kernel_h": 3, "kernel_w": 3}, (1, 3, 6, 7, 8),
                         2 * 2 * (4 * 5 * 6) * 3 * 27, (2 * 4 * 5 * 6 + 2 * 3 * 27 + 3 * 6 * 7 * 8) * F32,
                         1410 * F16),
    # --- normalization
    "layernorm": ({"rows": 8, "cols": 32}, (8, 32), 5 * 8 * 32, (2 * 8 * 32 + 2 * 32) * F32, 576 * F16),
    "rmsnorm": ({"rows": 8, "cols": 32}, (8, 32), 4 * 8 * 32, (2 * 8 * 32 + 32) * F32, 544 * F16),
    "batchnorm_inference": ({"batch": 2, "channels": 3, "height": 4, "width": 5}, (2, 3, 4, 5), 2 * 120,
                            (2 * 120 + 4 * 3) * F32, 252 * F16),
    "groupnorm": ({"batch": 2, "channels_per_group": 2, "height": 4, "width": 5}, (2, 16, 4, 5), 5 * 2 * 16 * 20,
                  (2 * 2 * 16 * 20 + 2 * 16) * F32, 1312 * F16),
    "instancenorm": ({"batch": 2, "channels": 3, "height": 4, "width": 5}, (2, 3, 4, 5), 4 * 120,
                     2 * 120 * F32, 240 * F16),
    "l2_normalize": ({"rows": 4, "cols": 33}, (4, 33), 3 * 4 * 33, 2 * 4 * 33 * F32, 264 * F16),
    # --- reductions: 1 per element (L2 norm: 2); one output per kept position (argmax: int64)
    "rowsum": ({"rows": 5, "cols": 48}, (5,), 5 * 48, (5 * 48 + 5) * F32, 245 * F16),
    "sum": ({"batch": 2, "dim1": 16, "dim2": 7}, (2, 1, 7), 224, (224 + 14) * F32, 238 * F16),
    "mean": ({"batch": 2, "dim1": 16, "dim2": 7}, (2, 7), 224, (224 + 14) * F32, 238 * F16),
    "max": ({"batch": 2, "dim1": 16, "dim2": 7}, (2, 7), 224, (224 + 14) * F32, 238 * F16),
    "min": ({"batch": 2, "dim1": 16, "dim2": 7}, (2, 7), 224, (224 + 14) * F32, 238 * F16),
    "argmax": ({"batch": 2, "dim1": 16, "dim2": 7}, (2, 7), 224, 224 * F32 + 14 * 8, 224 * F16 + 14 * 8),
    "argmin": ({"batch": 2, "dim1": 16, "dim2": 7}, (2, 7), 224, 224 * F32 + 14 * 8, 224 * F16 + 14 * 8),
    "prod": ({"batch": 2, "dim1": 16, "dim2": 7}, (2, 7), 224, (224 + 14) * F32, 238 * F16),
    "l2norm": ({"batch": 2, "dim1": 16, "dim2": 7}, (2, 7), 2 * 224, (224 + 14) * F32, 238 * F16),
    # --- softmax: 5 per element
    "softmax": ({"rows": 4, "cols": 64}, (4, 64), 5 * 256, 2 * 256 * F32, 512 * F16),
    "log_softmax": ({"rows": 4, "cols": 64}, (4, 64), 5 * 256, 2 * 256 * F32, 512 * F16),
    # --- elementwise on 4 x 40 = 160 elements
    "relu": ({"rows": 4, "cols": 40}, (4, 40), 160, 320 * F32, 320 * F16),
    "sigmoid": ({"rows": 4, "cols": 40}, (4, 40), 3 * 160, 320 * F32, 320 * F16),
    "tanh": ({"rows": 4, "cols": 40}, (4, 40), 160, 320 * F32, 320 * F16),
    "silu": ({"rows": 4, "cols": 40}, (4, 40), 4 * 160, 320 * F32, 320 * F16),
    "gelu": ({"rows": 4, "cols": 40}, (4, 40), 5 * 160, 320 * F32, 320 * F16),
    "gelu_tanh": ({"rows": 4, "cols": 40}, (4, 40), 9 * 160, 320 * F32, 320 * F16),
    "add_broadcast": ({"rows": 4, "cols": 40}, (4, 40), 160, (320 + 40) * F32, 360 * F16),
    "mul_broadcast": ({"rows": 4, "cols": 40}, (4, 40), 160, (320 + 4) * F32, 324 * F16),
    # --- attention, B=1 H=2 S=16 D=8: 512 scores; 4*512*8 for the products + 5*512 softmax
    "sdpa": ({"batch": 1, "heads": 2, "seq": 16, "head_dim": 8}, (1, 2, 16, 8), 4 * 512 * 8 + 5 * 512,
             4 * 2 * 16 * 8 * F32, 1024 * F16),
    "sdpa_causal": ({"batch": 1, "heads": 2, "seq": 16, "head_dim": 8}, (1, 2, 16, 8), (4 * 512 * 8 + 5 * 512) // 2,
                    4 * 2 * 16 * 8 * F32, 1024 * F16),
    # --- scan
    "cumsum": ({"rows": 3, "cols": 50}, (3, 50), 150, 2 * 150 * F32, 300 * F16),
}

# What torch.utils.flop_counter counts for the matmul-like ops at the HAND shapes, and the stated
# factor F / counted: bias adds and the softmax are not counted, nor the causal halving.
FLOP_COUNTER = {
    "matmul": (8192, 1.0), "matmul_tall_skinny": (4096, 1.0), "bmm": (9216, 1.0), "matmul_tf32": (8192, 1.0),
    "linear": (2 * 16 * 24 * 32, 1 + 1 / (2 * 32)),  # + batch*out bias adds: 1 + 1/(2*in)
    "conv1d": (8640, 1.0), "conv2d": (25344, 1.0), "conv3d": (19440, 1.0), "conv_depthwise2d": (11520, 1.0),
    "conv_transpose1d": (4608, 1.0), "conv_transpose2d": (12096, 1.0), "conv_transpose3d": (38880, 1.0),
    "sdpa": (4 * 512 * 8, 1 + 5 / (4 * 8)),  # + 5 per score for the softmax: 1 + 5/(4*D)
    "sdpa_causal": (4 * 512 * 8, (1 + 5 / (4 * 8)) / 2),  # the counter counts all S^2 scores
}

OPS = list_ops()
IDS = [op.name for op in OPS]
MATMUL_LIKE = [op for op in OPS if op.matmul_like]


def _inputs(op, shape, dtype="float32", distribution="normal", seed=0):
    return op.example_inputs(shape, dtype=dtype, distribution=distribution, seed=seed)


# --- registry ------------------------------------------------------------------------------


def test_catalogue_is_listed_sorted_and_covers_the_issue():
    assert IDS == sorted(IDS)
    assert {"layernorm", "softmax", "rowsum", "matmul"} <= set(IDS)  # the original four stay
    categories = {op.category for op in OPS}
    assert categories == {"gemm", "convolution", "normalization", "reduction", "softmax", "elementwise",
                          "attention", "scan"}
    wanted = {"matmul", "matmul_tall_skinny", "bmm", "linear", "matmul_tf32", "conv1d", "conv2d", "conv3d",
              "conv_depthwise2d", "conv_transpose2d", "layernorm", "rmsnorm", "batchnorm_inference", "groupnorm",
              "instancenorm", "sum", "mean", "max", "min", "argmax", "argmin", "prod", "l2norm", "softmax",
              "log_softmax", "relu", "gelu", "silu", "tanh", "sigmoid", "add_broadcast", "mul_broadcast", "sdpa",
              "sdpa_causal", "cumsum"}
    assert wanted <= set(IDS)


def test_ops_live_in_their_category_modules():
    gemm = importlib.import_module("kernelgate.reference_ops.gemm")
    assert gemm.matmul is get_op("matmul").reference
    for op in OPS:
        module = op.reference.__module__
        assert module.startswith("kernelgate.reference_ops."), module
        assert module.rsplit(".", 1)[-1] in CATEGORY_MODULES


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_every_op_has_a_hand_count_and_a_formula(op):
    assert op.name in HAND, f"add a hand count for {op.name} to HAND"
    assert op.name in EXPECTED, f"add an independent formula for {op.name} to EXPECTED"
    if op.matmul_like:
        assert op.name in FLOP_COUNTER, f"add the FlopCounterMode count for {op.name} to FLOP_COUNTER"


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_fields_are_consistent(op):
    assert op.default_dtype in op.dtypes and set(op.dtypes) <= set(DTYPES)
    assert op.shape(op.smoke_shape) == {**op.default_shape, **(op.smoke_shape or {})}
    assert all(1 <= i <= 100 for i in op.kernelbench_level1)
    assert all(0 <= i < len(op.input_shapes(op.shape())) for i in op.positive_inputs)
    for dtype in op.dtypes:
        tol = op.tolerance_for(dtype)
        assert tol is None or (tol.atol > 0 and tol.rtol > 0)


def test_kernelbench_ids_are_claimed_once():
    seen: dict[int, str] = {}
    for op in OPS:
        for pid in op.kernelbench_level1:
            assert pid not in seen, f"KernelBench {pid} claimed by {seen[pid]} and {op.name}"
            seen[pid] = op.name
    assert seen[1] == "matmul" and seen[23] == "softmax" and seen[40] == "layernorm" and seen[47] == "sum"


def test_registering_twice_or_an_unknown_dtype_is_refused():
    spec = dict(category="gemm", input_shapes=lambda s: [(s["n"],)], flops=lambda s: 1.0,
                bytes_compulsory=lambda s, e: 1.0, default_shape={"n": 1})
    with pytest.raises(ValueError, match="registered twice"):
        reference_op(name="matmul", **spec)(lambda x: x)
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        reference_op(name="test_only_never_registered", dtypes=("float64",), **spec)(lambda x: x)
    with pytest.raises(KeyError):
        get_op("test_only_never_registered")


# --- cost model ----------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_cost_matches_hand_count(op):
    shape, _, flops, bytes32, bytes16 = HAND[op.name]
    s = op.shape(shape)
    assert s == shape, "the hand-count shape names every parameter"
    assert op.flops(s) == flops
    assert op.bytes_compulsory(s, 4) == bytes32
    assert op.bytes_compulsory(s, 2) == bytes16


# The original four at their default shapes (the study's numbers use them).
R, C = 4096, 4096
SR, SC = 4096, 8192
DEFAULTS = {
    "layernorm": ({"rows": R, "cols": C}, 5 * R * C, (2 * R * C + 2 * C) * F32),
    "softmax": ({"rows": SR, "cols": SC}, 5 * SR * SC, 2 * SR * SC * F32),
    "rowsum": ({"rows": SR, "cols": SC}, SR * SC, (SR * SC + SR) * F32),
    "matmul": ({"m": 4096, "n": 4096, "k": 4096}, 2 * 4096**3, 3 * 4096 * 4096 * F32),
}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_original_ops_keep_their_defaults_and_costs(name):
    op = get_op(name)
    shape, flops, nbytes = DEFAULTS[name]
    assert op.default_shape == shape and op.default_dtype == "float32"
    assert op.flops(op.shape()) == flops
    assert op.bytes_compulsory(op.shape(), F32) == nbytes


def test_cost_at_overridden_shape():
    ln = get_op("layernorm")
    s = ln.shape({"rows": 3})
    assert s == {"rows": 3, "cols": 4096}
    assert ln.flops(s) == 5 * 3 * 4096
    assert ln.bytes_compulsory(s, 2) == (2 * 3 * 4096 + 2 * 4096) * 2


@pytest.mark.parametrize("op", MATMUL_LIKE, ids=[op.name for op in MATMUL_LIKE])
def test_flops_agree_with_torch_flop_counter(op):
    shape = op.shape(HAND[op.name][0])
    counted, factor = FLOP_COUNTER[op.name]
    inputs = _inputs(op, shape)
    # the CPU flash-attention kernel is not registered with the counter: the math path is
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        op.reference(*inputs)
    assert counter.get_total_flops() == counted
    assert op.flops(shape) == pytest.approx(counted * factor)


def test_matmul_flops_agree_with_counter_at_odd_shapes():
    op = get_op("matmul")
    for m, n, k in [(3, 5, 7), (64, 1, 128)]:
        shape = op.shape({"m": m, "n": n, "k": k})
        with FlopCounterMode(display=False) as counter:
            op.reference(*_inputs(op, shape))
        assert counter.get_total_flops() == op.flops(shape) == 2 * m * n * k


# --- references ----------------------------------------------------------------------------


def _direct_conv(x, w, groups=1):
    """Stride-1, unpadded N-d convolution by summing over kernel offsets (weight (Cout, Cin/g, *k))."""
    spatial = w.shape[2:]
    out_size = [x.shape[2 + i] - spatial[i] + 1 for i in range(len(spatial))]
    n, cin = x.shape[:2]
    cout = w.shape[0]
    y = x.new_zeros((n, cout, *out_size))
    xg = x.reshape(n, groups, cin // groups, *x.shape[2:])
    wg = w.reshape(groups, cout // groups, cin // groups, *spatial)
    for offset in torch.cartesian_prod(*[torch.arange(k) for k in spatial]).reshape(-1, len(spatial)).tolist():
        window = xg[(slice(None), slice(None), slice(None),
                     *[slice(o, o + size) for o, size in zip(offset, out_size)])]
        tap = wg[(slice(None), slice(None), slice(None), *offset)]
        y += torch.einsum("ngc...,goc->ngo...", window, tap).reshape(n, cout, *out_size)
    return y


def _adjoint_check(op, inputs):
    """<convT(x, w), y> == <x, conv(y, w)>: a transposed convolution is the adjoint of a convolution."""
    x, w = inputs
    out = op.reference(x, w)
    y = torch.randn(out.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(1))
    return out, (out * y).sum(), (x * _direct_conv(y, w)).sum()


def _attention(q, k, v, causal):
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = q.shape[-2]
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, -1) @ v


def _sum_last(x):
    return x @ torch.ones(x.shape[-1], dtype=x.dtype)


def _normalize(x, dims, eps):
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


EXPECTED = {
    "matmul": lambda a, b: (a[:, :, None] * b[None, :, :]).sum(1),
    "matmul_tall_skinny": lambda a, b: (a[:, :, None] * b[None, :, :]).sum(1),
    "matmul_tf32": lambda a, b: (a[:, :, None] * b[None, :, :]).sum(1),
    "bmm": lambda a, b: (a[:, :, :, None] * b[:, None, :, :]).sum(2),
    "linear": lambda x, w, b: (x[:, None, :] * w[None, :, :]).sum(-1) + b,
    "conv1d": lambda x, w: _direct_conv(x, w),
    "conv2d": lambda x, w: _direct_conv(x, w),
    "conv3d": lambda x, w: _direct_conv(x, w),
    "conv_depthwise2d": lambda x, w: _direct_conv(x, w, groups=x.shape[1]),
    "conv_transpose1d": "adjoint", "conv_transpose2d": "adjoint", "conv_transpose3d": "adjoint",
    "layernorm": lambda x, w, b: _normalize(x, (-1,), 1e-5) * w + b,
    "rmsnorm": lambda x, w: x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w,
    "batchnorm_inference": lambda x, w, b, m, v: ((x - m[:, None, None]) / torch.sqrt(v[:, None, None] + 1e-5)
                                                  * w[:, None, None] + b[:, None, None]),
    "groupnorm": lambda x, w, b: (_normalize(x.reshape(x.shape[0], 8, -1), (-1,), 1e-5).reshape(x.shape)
                                  * w[:, None, None] + b[:, None, None]),
    "instancenorm": lambda x: _normalize(x, (2, 3), 1e-5),
    "l2_normalize": lambda x: x / torch.sqrt((x * x).sum(1, keepdim=True)),
    "rowsum": _sum_last,
    "sum": lambda x: _sum_last(x.transpose(1, 2))[:, None, :],
    "mean": lambda x: _sum_last(x.transpose(1, 2)) / x.shape[1],
    "max": lambda x: x.sort(dim=1).values[:, -1],
    "min": lambda x: x.sort(dim=1).values[:, 0],
    "argmax": lambda x: x.sort(dim=1, stable=True).indices[:, -1],
    "argmin": lambda x: x.sort(dim=1, stable=True).indices[:, 0],
    "prod": lambda x: torch.exp(_sum_last(torch.log(x).transpose(1, 2))),
    "l2norm": lambda x: torch.sqrt(_sum_last((x * x).transpose(1, 2))),
    "softmax": lambda x: torch.exp(x) / _sum_last(torch.exp(x))[:, None],
    "log_softmax": lambda x: x - torch.log(_sum_last(torch.exp(x)))[:, None],
    "relu": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "sigmoid": lambda x: 1 / (1 + torch.exp(-x)),
    "tanh": lambda x: (torch.exp(2 * x) - 1) / (torch.exp(2 * x) + 1),
    "silu": lambda x: x / (1 + torch.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + torch.special.erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "add_broadcast": lambda x, y: x + y[None, :].expand_as(x),
    "mul_broadcast": lambda x, y: x * y.expand_as(x),
    "sdpa": lambda q, k, v: _attention(q, k, v, causal=False),
    "sdpa_causal": lambda q, k, v: _attention(q, k, v, causal=True),
    "cumsum": lambda x: x @ torch.ones(x.shape[1], x.shape[1], dtype=x.dtype).triu(),
}


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_reference_matches_an_independent_formula_in_fp64(op):
    shape, out_shape, *_ = HAND[op.name]
    inputs = [x.double() for x in _inputs(op, op.shape(shape), distribution="uniform_signed", seed=3)]
    if EXPECTED[op.name] == "adjoint":
        out, lhs, rhs = _adjoint_check(op, inputs)
        assert tuple(out.shape) == out_shape
        torch.testing.assert_close(lhs, rhs)
        return
    out = op.reference(*inputs)
    expected = EXPECTED[op.name](*inputs)
    assert tuple(out.shape) == out_shape
    if out.dtype == torch.int64:
        assert torch.equal(out, expected)
    else:
        torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("op", OPS, ids=IDS)
@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_reference_runs_on_every_distribution(op, distribution):
    shape, out_shape, *_ = HAND[op.name]
    inputs = _inputs(op, op.shape(shape), distribution=distribution)
    assert [tuple(x.shape) for x in inputs] == [tuple(s) for s in op.input_shapes(op.shape(shape))]
    for index, x in enumerate(inputs):
        assert x.dtype == torch.float32
        assert torch.isfinite(x).all(), f"input {index} is not finite"
        assert bool((x != 0).any()), f"input {index} is all zeros"
        if index in op.positive_inputs:
            assert bool((x > 0).all())
    out = op.reference(*inputs)
    assert type(out) is torch.Tensor and tuple(out.shape) == out_shape
    assert out.dtype == (torch.int64 if op.name in ("argmax", "argmin") else torch.float32)
    assert torch.isfinite(out.double()).all()


@pytest.mark.parametrize("op", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reference_runs_in_half_precision_on_cpu(op, dtype):
    shape, out_shape, *_ = HAND[op.name]
    out = op.reference(*_inputs(op, op.shape(shape), dtype=dtype))
    assert tuple(out.shape) == out_shape
    assert out.dtype in (DTYPES[dtype], torch.int64)


def test_inputs_are_seeded():
    op = get_op("conv2d")
    a, b = _inputs(op, op.shape(HAND["conv2d"][0]), seed=5), _inputs(op, op.shape(HAND["conv2d"][0]), seed=5)
    c = _inputs(op, op.shape(HAND["conv2d"][0]), seed=6)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_neighbouring_shape_is_valid(op):
    """The gate's shape probe adds 1 to every parameter: the op must still be well defined there."""
    shape = {k: v + 1 for k, v in HAND[op.name][0].items()}
    out = op.reference(*_inputs(op, op.shape(shape)))
    assert torch.isfinite(out.double()).all()


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_product_factors_stay_near_one_at_a_long_reduction(distribution):
    op = get_op("prod")
    shape = op.shape({"batch": 2, "dim1": 4096, "dim2": 3})
    (x,) = _inputs(op, shape, distribution=distribution)
    assert float((x - 1).abs().max()) < 0.01  # |x| / 4096 for draws below ~40 in magnitude
    out = op.reference(x)
    assert torch.isfinite(out).all()
    assert float(out.min()) > math.exp(-8) and float(out.max()) < math.exp(8)
    assert not torch.allclose(out, torch.ones_like(out))  # the product still carries the inputs


def test_batchnorm_variance_is_positive_for_every_distribution():
    op = get_op("batchnorm_inference")
    for distribution in DISTRIBUTIONS:
        var = _inputs(op, op.shape(HAND["batchnorm_inference"][0]), distribution=distribution)[4]
        assert float(var.min()) >= 0.5


# --- TF32, math modes, tolerances ----------------------------------------------------------


def test_matmul_tf32_restores_the_flag():
    op = get_op("matmul_tf32")
    a, b = _inputs(op, op.shape(HAND["matmul_tf32"][0]))
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for before in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = before
            op.reference(a, b)
            assert torch.backends.cuda.matmul.allow_tf32 is before
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def test_math_and_peak_modes():
    mm, ln, tf32 = get_op("matmul"), get_op("layernorm"), get_op("matmul_tf32")
    assert mm.matmul_like and not ln.matmul_like
    assert mm.math_mode("float32") is MathMode.fp32
    assert mm.peak_mode("float32") is MathMode.tf32  # fp32 GEMM may run on TF32 tensor cores
    assert ln.peak_mode("float32") is MathMode.fp32
    assert mm.peak_mode("float16") is MathMode.fp16
    assert ln.math_mode("bfloat16") is MathMode.bf16
    assert tf32.math_mode("float32") is MathMode.tf32 and tf32.peak_mode("float32") is MathMode.tf32
    assert get_op("conv2d").peak_mode("float32") is MathMode.tf32
    assert get_op("sdpa").peak_mode("bfloat16") is MathMode.bf16


def test_tolerances():
    assert get_op("matmul_tf32").tolerance_for("float32") == Tolerance(atol=5e-3, rtol=5e-3)
    assert get_op("matmul_tf32").tolerance_for("float16") is None
    assert get_op("matmul").tolerance_for("float32") is None


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_built_problem_uses_the_catalogue(op):
    shape = HAND[op.name][0]
    problem = build_problem(Problem.op(op.name, **shape), torch.device("cpu"), seed=0)
    gen = torch.Generator().manual_seed(0)
    inputs = problem.make_inputs("normal_offset", gen)
    assert [tuple(x.shape) for x in inputs] == [tuple(s) for s in op.input_shapes(op.shape(shape))]
    for index in op.positive_inputs:
        assert bool((inputs[index] > 0).all())
    out = problem.reference(*inputs)
    cost = problem.cost(inputs, out)
    assert cost.estimate == f"catalogue:{op.name}"
    assert (cost.flops, cost.bytes_compulsory) == (HAND[op.name][2], HAND[op.name][3])
    assert cost.math_mode is op.math_mode("float32") and cost.peak_mode is op.peak_mode("float32")
    assert problem.numerics_tolerance == (op.tolerance_for("float32") or TOLERANCES[torch.float32])


def test_built_tf32_problem_has_its_tolerance_and_math_mode():
    problem = build_problem(Problem.op("matmul_tf32", m=8, n=16, k=32), torch.device("cpu"), seed=0)
    assert problem.tolerance == Tolerance(atol=5e-3, rtol=5e-3)
    inputs = problem.make_inputs("normal", torch.Generator().manual_seed(0))
    cost = problem.cost(inputs, problem.reference(*inputs))
    assert cost.math_mode is MathMode.tf32 and cost.peak_mode is MathMode.tf32
    half = build_problem(Problem.op("matmul_tf32", dtype="float16", m=8, n=16, k=32), torch.device("cpu"), 0)
    assert half.tolerance is None and half.numerics_tolerance == TOLERANCES[torch.float16]


def test_compare_takes_the_problems_tolerance():
    """A TF32-sized error fails strict fp32 and passes the TF32 op's tolerance."""
    op = get_op("matmul_tf32")
    a, b = _inputs(op, op.shape({"m": 32, "n": 32, "k": 64}))

    def tf32_like(x, y):  # round the operands to a 10-bit mantissa, as TF32 tensor cores do
        def rounded(t):
            return (t.view(torch.int32) + 0x1000 & ~0x1FFF).view(torch.float32)
        return rounded(x) @ rounded(y)

    strict, _ = _judged("normal", tf32_like, op.reference, op.reference, [a, b], TOLERANCES[torch.float32])
    assert not strict.passed and strict.reason is Reason.numerics_mismatch
    loose, _ = _judged("normal", tf32_like, op.reference, op.reference, [a, b], op.tolerance_for("float32"))
    assert loose.passed, loose.message


# --- integer outputs in numerics -----------------------------------------------------------


def _judged(distribution, candidate, reference, reference64, inputs, tol):
    """A candidate's output checked as the judge checks a trial: against the fp64 reference."""
    ref = reference(*[x.clone() for x in inputs])
    ref64 = reference64(*[x.double() if x.is_floating_point() else x.clone() for x in inputs]).double()
    return check_trial_output(distribution, candidate(*[x.clone() for x in inputs]), ref, ref64, tol), ref


def test_integer_outputs_must_match_exactly():
    op = get_op("argmax")
    x = torch.randn(2, 40000, 3, generator=torch.Generator().manual_seed(0))
    ref = op.reference(x)
    ref64 = op.reference(x.double()).double()
    tol = TOLERANCES[torch.float32]
    ok = check_trial_output("normal", ref.clone(), ref, ref64, tol)
    assert ok.passed and ok.normalized_error == 0
    off = ref.clone()
    off[0, 0] += 1  # one index off by one: with indices near 20000 the rms-scaled bound would be > 1
    assert normalized_error(off, ref64, tol) == (1.0, 2.0)
    bad = check_trial_output("normal", off, ref, ref64, tol)
    assert not bad.passed and bad.reason is Reason.numerics_mismatch
    assert "1 of 6 integer output elements differ" in bad.message and "exactly" in bad.message


def test_argmax_problem_passes_its_own_reference_through_compare():
    problem = build_problem(Problem.op("argmax", batch=2, dim1=16, dim2=7), torch.device("cpu"), seed=0)
    inputs = problem.make_inputs("uniform01", torch.Generator().manual_seed(0))
    result, ref = _judged("uniform01", get_op("argmax").reference, problem.reference, problem.reference_fp64(),
                          inputs, problem.numerics_tolerance)
    assert result.passed and ref.dtype == torch.int64
    wrong, _ = _judged("uniform01", lambda x: torch.argmin(x, dim=1), problem.reference, problem.reference_fp64(),
                       inputs, problem.numerics_tolerance)
    assert not wrong.passed and wrong.reason is Reason.numerics_mismatch


# --- the generic cost model (KernelBench files without a catalogue entry) ---------------------


def _generic(module, inputs) -> BuiltProblem:
    return BuiltProblem(spec=Problem(kind="kernelbench_file", name="x.py"), dtype=torch.float32,
                        device=torch.device("cpu"), reference=module, init_inputs=[],
                        input_factory=lambda d, g: inputs, catalogue_cost=None)


def test_generic_cost_of_a_convolution_module_with_bias():
    conv = torch.nn.Conv2d(3, 4, kernel_size=3, bias=True)
    x = torch.randn(2, 3, 10, 12)
    out = conv(x)
    cost = _generic(conv, [x]).cost([x], out)
    assert cost.estimate.startswith("generic")
    assert cost.flops == 2 * 2 * 4 * 8 * 10 * 3 * 3 * 3  # the convolution; the bias adds are not counted
    assert cost.bytes_compulsory == (2 * 3 * 10 * 12 + 4 * 3 * 3 * 3 + 4 + 2 * 4 * 8 * 10) * 4
    assert cost.math_mode is MathMode.fp32 and cost.peak_mode is MathMode.tf32  # FLOPs counted: matmul-like


def test_generic_cost_of_an_elementwise_module_counts_bytes_only():
    x = torch.randn(5, 7)
    cost = _generic(torch.nn.ReLU(), [x]).cost([x], torch.relu(x))
    assert cost.flops == 0 and cost.bytes_compulsory == 2 * 35 * 4
    assert cost.peak_mode is MathMode.fp32


def test_generic_cost_counts_buffers_and_agrees_with_the_catalogue_on_a_linear():
    lin = torch.nn.Linear(32, 24)
    x = torch.randn(16, 32)
    cost = _generic(lin, [x]).cost([x], lin(x))
    op = get_op("linear")
    s = op.shape({"batch": 16, "in_features": 32, "out_features": 24})
    assert cost.bytes_compulsory == op.bytes_compulsory(s, 4)
    assert cost.flops == op.flops(s) - 16 * 24  # FlopCounterMode leaves out the bias adds
    bn = torch.nn.BatchNorm2d(3).eval()
    y = torch.randn(2, 3, 4, 5)
    bn_cost = _generic(bn, [y]).cost([y], bn(y))
    # x, y, weight, bias, running mean and var, and the int64 num_batches_tracked counter
    assert bn_cost.bytes_compulsory == (2 * 120 + 4 * 3) * 4 + 8


# --- kernelgate ops --------------------------------------------------------------------------


def test_ops_command_lists_every_op_with_its_fields(capsys):
    assert main(["ops"]) == 0
    text = capsys.readouterr().out
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    for op in OPS:
        assert op.name in lines, f"{op.name} missing from `kernelgate ops`"
    assert "55,56,62,63,87" in lines["conv2d"] and "fp32,fp16,bf16" in lines["conv2d"]
    assert "m=4096 n=4096 k=4096" in lines["matmul"]
    assert "fp32 0.005/0.005" in lines["matmul_tf32"] and lines["relu"].rstrip().endswith("default")
    assert f"{len(OPS)} ops." in text


def test_ops_command_json(capsys):
    assert main(["ops", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(IDS)
    for op in OPS:
        row = rows[op.name]
        assert row["category"] == op.category and row["default_shape"] == op.default_shape
        assert row["dtypes"] == list(op.dtypes) and row["kernelbench_level1"] == list(op.kernelbench_level1)
    assert rows["matmul_tf32"]["tolerance"] == {"float32": {"atol": 5e-3, "rtol": 5e-3}}
    assert rows["softmax"]["tolerance"] is None


# --- shape parameters ------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_shape_rejects_unknown_keys_and_keeps_defaults(op):
    with pytest.raises(KeyError, match="no shape parameter bogus"):
        op.shape({"bogus": 3})
    before = dict(op.default_shape)
    key = next(iter(before))
    assert op.shape({key: 7})[key] == 7
    assert op.default_shape == before


def test_get_op_unknown_raises_key_error():
    with pytest.raises(KeyError, match="unknown reference op 'no_such_op'"):
        get_op("no_such_op")
    with pytest.raises(KeyError):
        get_op("LayerNorm")  # names are exact
    for op in OPS:
        assert get_op(op.name) is op


def test_an_ops_own_tolerance_is_applied_in_a_screen():
    """TF32-rounded inputs pass matmul_tf32's tolerance and fail strict fp32's, in a real worker."""
    from kernelgate import Candidate, Problem, Reason, Status, screen
    from tests.conftest import fixture_source

    source = fixture_source("matmul_tf32_emulated.py")
    tf32 = screen(Candidate(source=source, entry="kernel"), Problem.op("matmul_tf32", m=32, n=24, k=16))
    strict = screen(Candidate(source=source, entry="kernel"), Problem.op("matmul", m=32, n=24, k=16))
    assert tf32.status is not Status.reject, tf32.failure and tf32.failure.message
    assert tf32.numerics.atol == 5e-3
    assert strict.status is Status.reject and strict.reason is Reason.numerics_mismatch
