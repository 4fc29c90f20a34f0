"""Conv2d candidate (deliberately slow): direct convolution with scalar FMA loops.

Problem: catalogue op ``conv2d`` (target fp16): y = conv2d(x, weight), x (N, C, H, W),
weight (Cout, C, KH, KW), stride 1, no padding, no bias, output
(N, Cout, H - KH + 1, W - KW + 1) in x's dtype.

Design: one program per (n, cout) pair and per BLOCK=64 output pixels of that
image plane (pixels flattened over OH * OW). The program keeps a 64-wide fp32
accumulator and walks the reduction C * KH * KW one tap at a time: load one
weight scalar, load the 64 input pixels it multiplies (masked at the plane's
edge), multiply-add. The result is cast to the output dtype on the store.

Defect: the convolution is written as a direct loop nest instead of a GEMM.
There is no tl.dot, so the fp16 tensor cores are never used, and the tile is a
fixed 64 pixels x 1 output channel with 2 warps.

Why it is slow on a GPU: every input pixel is reloaded from L2/HBM once for
every output channel and every tap (Cout * KH * KW times instead of being
staged once in shared memory and reused across a block of output channels),
the reduction is a serial chain of C * KH * KW dependent vector FMAs on the
CUDA cores (576 steps at the default shape, each waiting on a load), and a
64-lane tile gives each warp little to overlap. Compute that a tensor-core
implicit GEMM does at hundreds of TFLOP/s runs at a few TFLOP/s here.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _conv2d_direct_kernel(x_ptr, w_ptr, y_ptr,
                          C, H, W, COUT, OH, OW, KH, KW,
                          sxn, sxc, sxh, sxw, swo, swc, swh, sww,
                          BLOCK: tl.constexpr):
    pid_nc = tl.program_id(0)  # n * COUT + co
    pid_p = tl.program_id(1)   # which BLOCK of output pixels in the plane
    n = pid_nc // COUT
    co = pid_nc % COUT

    p = pid_p * BLOCK + tl.arange(0, BLOCK)
    p_ok = p < OH * OW
    oh = p // OW
    ow = p % OW

    x_img = x_ptr + n.to(tl.int64) * sxn
    w_filt = w_ptr + co * swo
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, C):
        for kh in range(0, KH):
            for kw in range(0, KW):
                wv = tl.load(w_filt + c * swc + kh * swh + kw * sww).to(tl.float32)
                xv = tl.load(x_img + c * sxc + (oh + kh) * sxh + (ow + kw) * sxw,
                             mask=p_ok, other=0.0).to(tl.float32)
                acc += xv * wv

    y_plane = y_ptr + pid_nc.to(tl.int64) * (OH * OW)  # y is freshly allocated, contiguous
    tl.store(y_plane + p, acc.to(y_ptr.dtype.element_ty), mask=p_ok)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight):
        n, c, h, w = x.shape
        cout, _, kh, kw = weight.shape
        oh, ow = h - kh + 1, w - kw + 1
        y = torch.empty((n, cout, oh, ow), device=x.device, dtype=x.dtype)
        block = 64
        grid = (n * cout, triton.cdiv(oh * ow, block))
        _conv2d_direct_kernel[grid](
            x, weight, y, c, h, w, cout, oh, ow, kh, kw,
            x.stride(0), x.stride(1), x.stride(2), x.stride(3),
            weight.stride(0), weight.stride(1), weight.stride(2), weight.stride(3),
            BLOCK=block, num_warps=2,
        )
        return y
