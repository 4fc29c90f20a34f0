"""Convolutions through cuDNN: 1-D, 2-D, 3-D, depthwise 2-D, and transposed 1-D, 2-D, 3-D.

All are stride 1, no padding, no dilation, no bias, as in the KernelBench problems they match;
the weight is an input (``conv2d(x, w)``), so a candidate receives it like the activations.
Layouts are PyTorch's: activations ``(N, C, *spatial)``; weights ``(C_out, C_in / groups, *k)``
for a convolution and ``(C_in, C_out / groups, *k)`` for a transposed one.

F: a multiply-add counts 2, so a convolution costs ``2 * N * C_out * prod(out) * C_in/groups *
prod(k)``; a transposed convolution is counted on the input side, ``2 * N * C_in * prod(in) *
C_out/groups * prod(k)`` (each input element scatters into ``C_out/groups * prod(k)`` outputs).
These are the counts of ``torch.utils.flop_counter``. B reads the activations and the weight
once and writes the output once.

In fp32, cuDNN computes convolutions in TF32 by default (``torch.backends.cudnn.allow_tf32``),
and it may pick Winograd or FFT algorithms that do fewer multiplications than F: its U against
the fp32 peak can exceed 1. The gate holds a candidate to twice the library's own error, so a
TF32 library sets the bar; the physics floor of an fp32 convolution uses the TF32 peak.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._registry import conv_out, conv_transpose_out, reference_op

CONV_DTYPES = ("float32", "float16", "bfloat16")


def _prod(*values: int) -> float:
    out = 1.0
    for v in values:
        out *= v
    return out


# --- standard convolutions ------------------------------------------------------------------


def _conv1d_out(s):
    return conv_out(s["length"], s["kernel_size"])


@reference_op(
    name="conv1d", category="convolution",
    input_shapes=lambda s: [(s["batch"], s["in_channels"], s["length"]),
                            (s["out_channels"], s["in_channels"], s["kernel_size"])],
    # one multiply-add per (n, c_out, l_out, c_in, k)
    flops=lambda s: 2.0 * _prod(s["batch"], s["out_channels"], _conv1d_out(s), s["in_channels"], s["kernel_size"]),
    # read x (N x Cin x L) and w (Cout x Cin x K), write y (N x Cout x Lout)
    bytes_compulsory=lambda s, e: (_prod(s["batch"], s["in_channels"], s["length"])
                                   + _prod(s["out_channels"], s["in_channels"], s["kernel_size"])
                                   + _prod(s["batch"], s["out_channels"], _conv1d_out(s))) * e,
    default_shape={"batch": 32, "in_channels": 64, "out_channels": 128, "length": 32768, "kernel_size": 3},
    smoke_shape={"batch": 2, "in_channels": 4, "out_channels": 6, "length": 32, "kernel_size": 3},
    dtypes=CONV_DTYPES,
    matmul_like=True,
    kernelbench_level1=(67,),
)
def conv1d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.conv1d(x, weight)


def _conv2d_out(s):
    return conv_out(s["height"], s["kernel_h"]), conv_out(s["width"], s["kernel_w"])


@reference_op(
    name="conv2d", category="convolution",
    input_shapes=lambda s: [(s["batch"], s["in_channels"], s["height"], s["width"]),
                            (s["out_channels"], s["in_channels"], s["kernel_h"], s["kernel_w"])],
    # one multiply-add per (n, c_out, h_out, w_out, c_in, kh, kw)
    flops=lambda s: 2.0 * _prod(s["batch"], s["out_channels"], *_conv2d_out(s), s["in_channels"],
                                s["kernel_h"], s["kernel_w"]),
    # read x (N x Cin x H x W) and w (Cout x Cin x Kh x Kw), write y (N x Cout x Hout x Wout)
    bytes_compulsory=lambda s, e: (_prod(s["batch"], s["in_channels"], s["height"], s["width"])
                                   + _prod(s["out_channels"], s["in_channels"], s["kernel_h"], s["kernel_w"])
                                   + _prod(s["batch"], s["out_channels"], *_conv2d_out(s))) * e,
    default_shape={"batch": 8, "in_channels": 64, "out_channels": 128, "height": 256, "width": 512,
                   "kernel_h": 3, "kernel_w": 3},
    smoke_shape={"batch": 2, "in_channels": 3, "out_channels": 4, "height": 10, "width": 12,
                 "kernel_h": 3, "kernel_w": 3},
    dtypes=CONV_DTYPES,
    matmul_like=True,
    # square and asymmetric inputs and kernels; 87 is the pointwise (1 x 1) case
    kernelbench_level1=(55, 56, 62, 63, 87),
)
def conv2d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, weight)


def _conv3d_out(s):
    return (conv_out(s["depth"], s["kernel_d"]), conv_out(s["height"], s["kernel_h"]),
            conv_out(s["width"], s["kernel_w"]))


@reference_op(
    name="conv3d", category="convolution",
    input_shapes=lambda s: [(s["batch"], s["in_channels"], s["depth"], s["height"], s["width"]),
                            (s["out_channels"], s["in_channels"], s["kernel_d"], s["kernel_h"], s["kernel_w"])],
    # one multiply-add per (n, c_out, d_out, h_out, w_out, c_in, kd, kh, kw)
    flops=lambda s: 2.0 * _prod(s["batch"], s["out_channels"], *_conv3d_out(s), s["in_channels"],
                                s["kernel_d"], s["kernel_h"], s["kernel_w"]),
    # read x and w, write y (N x Cout x Dout x Hout x Wout)
    bytes_compulsory=lambda s, e: (_prod(s["batch"], s["in_channels"], s["depth"], s["height"], s["width"])
                                   + _prod(s["out_channels"], s["in_channels"], s["kernel_d"], s["kernel_h"],
                                           s["kernel_w"])
                                   + _prod(s["batch"], s["out_channels"], *_conv3d_out(s))) * e,
    default_shape={"batch": 8, "in_channels": 3, "out_channels": 64, "depth": 64, "height": 64, "width": 64,
                   "kernel_d": 3, "kernel_h": 3, "kernel_w": 3},
    smoke_shape={"batch": 1, "in_channels": 2, "out_channels": 3, "depth": 5, "height": 6, "width": 7,
                 "kernel_d": 3, "kernel_h": 3, "kernel_w": 3},
    dtypes=CONV_DTYPES,
    matmul_like=True,
    kernelbench_level1=(54, 59, 60, 66),
)
def conv3d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.conv3d(x, weight)


@reference_op(
    name="conv_depthwise2d", category="convolution",
    input_shapes=lambda s: [(s["batch"], s["channels"], s["height"], s["width"]),
                            (s["channels"], 1, s["kernel_h"], s["kernel_w"])],
    # groups = channels: one multiply-add per (n, c, h_out, w_out, kh, kw)
    flops=lambda s: 2.0 * _prod(s["batch"], s["channels"], *_conv2d_out(s), s["kernel_h"], s["kernel_w"]),
    # read x (N x C x H x W) and w (C x 1 x Kh x Kw), write y (N x C x Hout x Wout)
    bytes_compulsory=lambda s, e: (_prod(s["batch"], s["channels"], s["height"], s["width"])
                                   + _prod(s["channels"], s["kernel_h"], s["kernel_w"])
                                   + _prod(s["batch"], s["channels"], *_conv2d_out(s))) * e,
    default_shape={"batch": 16, "channels": 64, "height": 256, "width": 256, "kernel_h": 3, "kernel_w": 3},
    smoke_shape={"batch": 2, "channels": 4, "height": 10, "width": 12, "kernel_h": 3, "kernel_w": 3},
    dtypes=CONV_DTYPES,
    matmul_like=True,
    kernelbench_level1=(82, 83, 84, 85),
)
def conv_depthwise2d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Depthwise: each channel convolved with its own filter (``groups = channels``)."""
    return F.conv2d(x, weight, groups=x.shape[1])


# --- transposed convolutions ----------------------------------------------------------------


def _convt1d_out(s):
    return conv_transpose_out(s["length"], s["kernel_size"])


@reference_op(
    name="conv_transpose1d", category="convolution",
    input_shapes=lambda s: [(s["batch"], s["in_channels"], s["length"]),
                            (s["in_channels"], s["out_channels"], s["kernel_size"])],
    # input side: one multiply-add per (n, c_in, l_in, c_out, k)
    flops=lambda s: 2.0 * _prod(s["batch"], s["in_channels"], s["length"], s["out_channels"], s["kernel_size"]),
    # read x (N x Cin x L) and w (Cin x Cout x K), write y (N x Cout x (L + K - 1))
    bytes_compulsory=lambda s, e: (_prod(s["batch"], s["in_channels"], s["length"])
                                   + _prod(s["in_channels"], s["out_channels"], s["kernel_size"])
                                   + _prod(s["batch"], s["out_channels"], _convt1d_out(s))) * e,
    default_shape={"batch": 64, "in_channels": 128, "out_channels": 128, "length": 16384, "kernel_size": 3},
    smoke_shape={"batch": 2, "in_channels": 4, "out_channels": 6, "length": 16, "kernel_size": 3},
    dtypes=CONV_DTYPES,
    matmul_like=True,
    kernelbench_level1=(64,),
)
def conv_transpose1d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose1d(x, weight)


def _convt2d_out(s):
    return conv_transpose_out(s["height"], s["kernel_h"]), conv_transpose_out(s["width"], s["kernel_w"])


@reference_op(
    name="conv_transpose2d", category="convolution",
    input_shapes=lambda s: [(s["batch"], s["in_channels"], s["height"], s["width"]),
                            (s["in_channels"], s["out_channels"], s["kernel_h"], s["kernel_w"])],
    # input side: one multiply-add per (n, c_in, h_in, w_in, c_out, kh, kw)
    flops=lambda s: 2.0 * _prod(s["batch"], s["in_channels"], s["height"], s["width"], s["out_channels"],
                                s["kernel_h"], s["kernel_w"]),
    # read x and w (Cin x Cout x Kh x Kw), write y (N x Cout x (H + Kh - 1) x (W + Kw - 1))
    bytes_compulsory=lambda s, e: (_prod(s["batch"], s["in_channels"], s["height"], s["width"])
                                   + _prod(s["in_channels"], s["out_channels"], s["kernel_h"], s["kernel_w"])
                                   + _prod(s["batch"], s["out_channels"], *_convt2d_out(s))) * e,
    default_shape={"batch": 8, "in_channels": 64, "out_channels": 64, "height": 512, "width": 512,
                   "kernel_h": 3, "kernel_w": 3},
    smoke_shape={"batch": 2, "in_channels": 3, "out_channels": 4, "height": 6, "width": 7,
                 "kernel_h": 3, "kernel_w": 3},
    dtypes=CONV_DTYPES,
    matmul_like=True,
    kernelbench_level1=(57, 65, 69, 71),
)
def conv_transpose2d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose2d(x, weight)


def _convt3d_out(s):
    return (conv_transpose_out(s["depth"], s["kernel_d"]), conv_transpose_out(s["height"], s["kernel_h"]),
            conv_transpose_out(s["width"], s["kernel_w"]))


@reference_op(
    name="conv_transpose3d", category="convolution",
    input_shapes=lambda s: [(s["batch"], s["in_channels"], s["depth"], s["height"], s["width"]),
                            (s["in_channels"], s["out_channels"], s["kernel_d"], s["kernel_h"], s["kernel_w"])],
    # input side: one multiply-add per (n, c_in, d_in, h_in, w_in, c_out, kd, kh, kw)
    flops=lambda s: 2.0 * _prod(s["batch"], s["in_channels"], s["depth"], s["height"], s["width"],
                                s["out_channels"], s["kernel_d"], s["kernel_h"], s["kernel_w"]),
    # read x and w (Cin x Cout x Kd x Kh x Kw), write y (N x Cout x Dout x Hout x Wout)
    bytes_compulsory=lambda s, e: (_prod(s["batch"], s["in_channels"], s["depth"], s["height"], s["width"])
                                   + _prod(s["in_channels"], s["out_channels"], s["kernel_d"], s["kernel_h"],
                                           s["kernel_w"])
                                   + _prod(s["batch"], s["out_channels"], *_convt3d_out(s))) * e,
    default_shape={"batch": 8, "in_channels": 48, "out_channels": 48, "depth": 64, "height": 64, "width": 64,
                   "kernel_d": 3, "kernel_h": 3, "kernel_w": 3},
    smoke_shape={"batch": 1, "in_channels": 2, "out_channels": 3, "depth": 4, "height": 5, "width": 6,
                 "kernel_d": 3, "kernel_h": 3, "kernel_w": 3},
    dtypes=CONV_DTYPES,
    matmul_like=True,
    kernelbench_level1=(58, 61, 68, 70),
)
def conv_transpose3d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose3d(x, weight)
