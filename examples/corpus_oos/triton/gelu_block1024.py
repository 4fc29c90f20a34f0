"""GELU candidate (intent: efficient), written 2026-12-04 before any timing.

Problem: catalogue op ``gelu`` (fp32, rows=4096 x cols=16384), exact erf form
y = 0.5 * x * (1 + erf(x / sqrt(2))).

The plain streaming kernel an LLM writes first: the tensor is one flat vector,
each program handles BLOCK=1024 contiguous elements with 4 warps (8 elements
per thread, so 2 x 16-byte loads), fp32 math with tl.math.erf. One read and one
write per element: should run near HBM bandwidth, like the library.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
        gelu_kernel[grid](x, y, n, BLOCK_SIZE=1024, num_warps=4)
        return y
