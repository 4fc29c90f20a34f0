"""The library side of every comparison: reference ops with their inputs and their cost model.

Each op is registered next to its definition with ``@reference_op``; it says how to draw its
inputs, which library call is the reference, and how many FLOPs (F) and compulsory bytes (B)
one call costs (each input read once, each output written once), with the count in a comment
beside each formula. Candidates for a catalogue op are functions (or argument-less ``ModelNew``
modules) called with the same inputs as the reference, weights included.

Shapes are named parameters with defaults (``rows``, ``cols``...) that callers override:
``Problem.op("conv2d", dtype="bfloat16", height=128)``.

The catalogue is split by category, one module each:

=================  ===========================================================================
``gemm``           matmul (square), tall-skinny, batched, linear with bias, TF32 matmul
``conv``           conv1d/2d/3d, depthwise 2d, transposed 1d/2d/3d (cuDNN)
``norm``           LayerNorm, RMSNorm, BatchNorm (inference), GroupNorm, InstanceNorm, L2 normalize
``reduction``      row sum; sum, mean, max, min, argmax, argmin, product, L2 norm over a dimension
``softmax``        softmax, log-softmax
``elementwise``    ReLU, GELU (erf and tanh), SiLU, tanh, sigmoid, add and mul with broadcast
``attention``      scaled dot-product attention, causal and not
``scan``           cumulative sum
=================  ===========================================================================

``docs/reference_ops.md`` says how to add an op and states the F and B conventions.
"""

from __future__ import annotations

from ._registry import DTYPES, ReferenceOp, conv_out, conv_transpose_out, get_op, list_ops, reference_op
from . import attention, conv, elementwise, gemm, norm, reduction, scan, softmax  # noqa: E402,F401  (registers)

__all__ = ["ReferenceOp", "reference_op", "get_op", "list_ops", "DTYPES", "conv_out", "conv_transpose_out",
           "CATEGORY_MODULES"]

CATEGORY_MODULES = ("gemm", "conv", "norm", "reduction", "softmax", "elementwise", "attention", "scan")
"""The modules that hold the ops, in the order of the table above."""
