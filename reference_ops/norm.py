"""Normalizations through ATen (and cuDNN for BatchNorm): LayerNorm, RMSNorm, BatchNorm in
inference, GroupNorm, InstanceNorm, and L2 normalization of rows.

F is nominal: every normalization here is memory-bound at any realistic shape, so F never sets
the floor. Per element:

- LayerNorm, GroupNorm: 5 (subtract the mean, square, accumulate, scale, shift; the mean and
  variance reductions included, per-row terms such as the rsqrt ignored);
- InstanceNorm (no affine): 4 (the same without the shift);
- RMSNorm: 4 (square, accumulate, scale by 1/rms, multiply by the weight);
- BatchNorm in inference: 2 (one multiply-add once the running statistics, weight and bias are
  folded into a per-channel scale and shift);
- L2 normalization: 3 (square, accumulate, divide).

B reads the activations and every parameter once and writes the output once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._registry import reference_op

NORM_DTYPES = ("float32", "float16", "bfloat16")


@reference_op(
    name="layernorm", category="normalization",
    input_shapes=lambda s: [(s["rows"], s["cols"]), (s["cols"],), (s["cols"],)],
    # per element: subtract mean, square, accumulate, scale, shift (mean and var reductions included)
    flops=lambda s: 5.0 * s["rows"] * s["cols"],
    # read x, write y, read weight and bias once
    bytes_compulsory=lambda s, e: (2.0 * s["rows"] * s["cols"] + 2.0 * s["cols"]) * e,
    default_shape={"rows": 4096, "cols": 4096},
    smoke_shape={"rows": 8, "cols": 32},
    dtypes=NORM_DTYPES,
    kernelbench_level1=(40,),  # normalizes the last three dims: rows of features*dim1*dim2 elements
)
def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


@reference_op(
    name="rmsnorm", category="normalization",
    input_shapes=lambda s: [(s["rows"], s["cols"]), (s["cols"],)],
    # per element: square, accumulate, scale by 1/rms, multiply by the weight
    flops=lambda s: 4.0 * s["rows"] * s["cols"],
    # read x, write y, read the weight once
    bytes_compulsory=lambda s, e: (2.0 * s["rows"] * s["cols"] + s["cols"]) * e,
    default_shape={"rows": 4096, "cols": 4096},
    smoke_shape={"rows": 8, "cols": 32},
    dtypes=NORM_DTYPES,
    # KernelBench's 36_RMSNorm_ normalizes over the channels of an NCHW tensor without a weight:
    # another op, not listed here
)
def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last dim with a learnable weight, eps 1e-6 (the LLM form)."""
    return F.rms_norm(x, (x.shape[-1],), weight, eps=1e-6)


@reference_op(
    name="batchnorm_inference", category="normalization",
    input_shapes=lambda s: [(s["batch"], s["channels"], s["height"], s["width"]),
                            (s["channels"],), (s["channels"],), (s["channels"],), (s["channels"],)],
    # per element: one multiply-add with the folded per-channel scale and shift
    flops=lambda s: 2.0 * s["batch"] * s["channels"] * s["height"] * s["width"],
    # read x, write y; read weight, bias, running mean and running variance once
    bytes_compulsory=lambda s, e: (2.0 * s["batch"] * s["channels"] * s["height"] * s["width"]
                                   + 4.0 * s["channels"]) * e,
    default_shape={"batch": 16, "channels": 64, "height": 256, "width": 256},
    smoke_shape={"batch": 2, "channels": 3, "height": 4, "width": 5},
    dtypes=NORM_DTYPES,
    positive_inputs=(4,),  # the running variance
    # KernelBench's 33_BatchNorm runs the module in training mode (batch statistics): not this op
)
def batchnorm_inference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, running_mean: torch.Tensor,
                        running_var: torch.Tensor) -> torch.Tensor:
    """BatchNorm2d in eval mode: normalized with the running statistics, eps 1e-5."""
    return F.batch_norm(x, running_mean, running_var, weight, bias, training=False, eps=1e-5)


GROUPNORM_GROUPS = 8
"""GroupNorm's group count is fixed (KernelBench's 35_GroupNorm_ uses 8): the reference receives
only tensors, and a fixed count keeps every shape valid (channels = 8 * channels_per_group)."""


@reference_op(
    name="groupnorm", category="normalization",
    input_shapes=lambda s: [(s["batch"], GROUPNORM_GROUPS * s["channels_per_group"], s["height"], s["width"]),
                            (GROUPNORM_GROUPS * s["channels_per_group"],),
                            (GROUPNORM_GROUPS * s["channels_per_group"],)],
    # per element: subtract mean, square, accumulate, scale, shift (as LayerNorm)
    flops=lambda s: 5.0 * s["batch"] * GROUPNORM_GROUPS * s["channels_per_group"] * s["height"] * s["width"],
    # read x, write y, read weight and bias (one value per channel) once
    bytes_compulsory=lambda s, e: (2.0 * s["batch"] * GROUPNORM_GROUPS * s["channels_per_group"] * s["height"]
                                   * s["width"] + 2.0 * GROUPNORM_GROUPS * s["channels_per_group"]) * e,
    default_shape={"batch": 16, "channels_per_group": 8, "height": 256, "width": 256},
    smoke_shape={"batch": 2, "channels_per_group": 2, "height": 4, "width": 5},
    dtypes=NORM_DTYPES,
    kernelbench_level1=(35,),
)
def groupnorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """GroupNorm with 8 groups of ``channels_per_group`` channels, affine, eps 1e-5."""
    return F.group_norm(x, GROUPNORM_GROUPS, weight, bias, eps=1e-5)


@reference_op(
    name="instancenorm", category="normalization",
    input_shapes=lambda s: [(s["batch"], s["channels"], s["height"], s["width"])],
    # per element: subtract mean, square, accumulate, scale (no affine)
    flops=lambda s: 4.0 * s["batch"] * s["channels"] * s["height"] * s["width"],
    # read x, write y
    bytes_compulsory=lambda s, e: 2.0 * s["batch"] * s["channels"] * s["height"] * s["width"] * e,
    default_shape={"batch": 16, "channels": 64, "height": 256, "width": 256},
    smoke_shape={"batch": 2, "channels": 3, "height": 4, "width": 5},
    dtypes=NORM_DTYPES,
    kernelbench_level1=(34,),  # InstanceNorm2d's defaults: no affine, no running statistics
)
def instancenorm(x: torch.Tensor) -> torch.Tensor:
    return F.instance_norm(x, eps=1e-5)


@reference_op(
    name="l2_normalize", category="normalization",
    input_shapes=lambda s: [(s["rows"], s["cols"])],
    # per element: square, accumulate, divide by the row's norm
    flops=lambda s: 3.0 * s["rows"] * s["cols"],
    # read x, write y
    bytes_compulsory=lambda s, e: 2.0 * s["rows"] * s["cols"] * e,
    default_shape={"rows": 2048, "cols": 65535},
    smoke_shape={"rows": 4, "cols": 33},
    dtypes=NORM_DTYPES,
    kernelbench_level1=(39,),
)
def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """Each row divided by its Euclidean norm (``x / torch.norm(x, p=2, dim=1, keepdim=True)``)."""
    return x / torch.linalg.vector_norm(x, ord=2, dim=1, keepdim=True)
