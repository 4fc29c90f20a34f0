"""Conv2d candidate (fast): implicit-GEMM convolution on the tensor cores.

Problem: catalogue op ``conv2d`` (target fp16; fp32 and bf16 also work):
y = conv2d(x, weight), x (N, C, H, W), weight (Cout, C, KH, KW), stride 1, no
padding, no bias, output (N, Cout, OH, OW) = (N, Cout, H - KH + 1, W - KW + 1).

Design: for each image, the convolution is the GEMM
    Y[co, p] = sum_k Wt[co, k] * X[k, p]
  p = (oh, ow)  output pixels of the image,
  k = (kh, kw, c), ordered tap-major, channel-minor, K = KH * KW * C,
  X[k, p] = x[n, c, oh + kh, ow + kw]   (the im2col matrix, never materialized:
                                         each tile is gathered straight from x).
Output channels are the GEMM's M and pixels its N, which suits NCHW: along N
the gathered x addresses and the y addresses are contiguous within a pixel row,
so both the loads and the store are coalesced across a warp.

Each program owns a BLOCK_M (output channels) x BLOCK_N (pixels) tile, the
pixels being a TILE_H x TILE_W patch of the output plane (TILE_W is picked on
the host to waste few lanes at the right edge: 128 x 1 for a 510-wide output,
narrower and taller patches for small images). One flat loop runs over the
KH * KW * ceil(C / BLOCK_K) K-steps; in a step the tap (kh, kw) and channel
block c0 are scalars, so the X tile's addresses are the per-pixel offsets
(computed once, before the loop) plus one scalar shift plus c * stride_c: no
per-element div/mod inside the loop. A single flat loop (rather than nested
kh / kw / c loops, where the innermost runs once when C <= BLOCK_K) gives
Triton's software pipeliner one long loop to overlap (num_stages=4): the loads
of the next K-steps are in flight while tl.dot runs on the current one.
Operands stay in the input dtype (fp16 -> wgmma with an fp32 accumulator); the
result is cast to the input dtype on the store.

The weight is repacked once per call to (Cout, KH, KW, C) contiguous (a 147 KB
copy at the default shape) so that its tile is a contiguous, vectorizable
BLOCK_M x BLOCK_K slab in the K order above. Program ids walk the Cout tiles
fastest, so programs that run together share the same x patch in L2. Edges
(channels, output channels and pixels not multiples of the tile) are masked and
zero-filled.

Tiles: 128 x 128 x 64 with 8 warps and 4 stages, at most 4 * 32 KB of shared
memory, inside sm_90's 227 KB per block; smaller BLOCK_M / BLOCK_K when Cout or
C are small. The tile is chosen on the host rather than by @triton.autotune,
whose benchmarking needs a GPU driver (the gate also runs candidates in
Triton's CPU interpreter). For fp32 inputs tl.dot uses input_precision="ieee":
the fp32 tolerance is tighter than TF32 gives.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _conv2d_igemm_kernel(x_ptr, wp_ptr, y_ptr,
                         C, COUT, OH, OW, KH, KW,
                         sxn, sxc, sxh, sxw,
                         PRECISION: tl.constexpr, TILE_H: tl.constexpr, TILE_W: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    BLOCK_N: tl.constexpr = TILE_H * TILE_W
    pid = tl.program_id(0)
    tiles_co = tl.cdiv(COUT, BLOCK_M)
    tiles_w = tl.cdiv(OW, TILE_W)
    per_img = tl.cdiv(OH, TILE_H) * tiles_w
    pid_co = pid % tiles_co
    pid_p = pid // tiles_co
    n = pid_p // per_img
    t = pid_p % per_img

    # this tile's pixels: a TILE_H x TILE_W patch, row-major (j % TILE_W keeps the
    # contiguity of ow visible to the compiler)
    j = tl.arange(0, BLOCK_N)
    oh = (t // tiles_w) * TILE_H + j // TILE_W
    ow = (t % tiles_w) * TILE_W + j % TILE_W
    p_ok = (oh < OH) & (ow < OW)
    x_img = x_ptr + n.to(tl.int64) * sxn
    pix_off = oh * sxh + ow * sxw

    rco = pid_co * BLOCK_M + tl.arange(0, BLOCK_M)
    co_ok = rco < COUT
    k_total = KH * KW * C
    w_rows = wp_ptr + rco.to(tl.int64)[:, None] * k_total
    rk = tl.arange(0, BLOCK_K)

    c_blocks = tl.cdiv(C, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for step in range(0, KH * KW * c_blocks):
        tap = step // c_blocks
        c = (step - tap * c_blocks) * BLOCK_K + rk
        c_ok = c < C
        kh = tap // KW
        kw = tap - kh * KW
        # repacked weight row co: [kh][kw][c], so this K-step is columns tap * C + c
        a = tl.load(w_rows + (tap * C + c)[None, :], mask=co_ok[:, None] & c_ok[None, :], other=0.0)
        b = tl.load(x_img + c[:, None] * sxc + (pix_off + (kh * sxh + kw * sxw))[None, :],
                    mask=c_ok[:, None] & p_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)

    # y is freshly allocated and contiguous (N, COUT, OH, OW)
    plane = OH * OW
    y_img = y_ptr + n.to(tl.int64) * COUT * plane
    y_off = rco.to(tl.int64)[:, None] * plane + (oh * OW + ow)[None, :]
    tl.store(y_img + y_off, acc.to(y_ptr.dtype.element_ty), mask=co_ok[:, None] & p_ok[None, :])


def _tile_w(ow: int, block_n: int) -> int:
    """Patch width in {16, ..., block_n} that leaves the fewest idle columns (the widest on ties)."""
    best = None
    for w in (16, 32, 64, 128):
        if w > block_n:
            break
        waste = triton.cdiv(ow, w) * w - ow
        if best is None or waste <= best[0]:
            best = (waste, w)
    return best[1]


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight):
        n, c, h, w = x.shape
        cout, _, kh, kw = weight.shape
        oh, ow = h - kh + 1, w - kw + 1
        wp = weight.permute(0, 2, 3, 1).contiguous()  # (Cout, KH, KW, C)
        y = torch.empty((n, cout, oh, ow), device=x.device, dtype=x.dtype)
        block_n = 128
        tile_w = _tile_w(ow, block_n)
        tile_h = block_n // tile_w
        block_m = 128 if cout > 64 else 64
        block_k = min(64, max(16, triton.next_power_of_2(c)))
        tiles = triton.cdiv(oh, tile_h) * triton.cdiv(ow, tile_w)
        grid = (n * tiles * triton.cdiv(cout, block_m),)
        precision = "ieee" if x.dtype == torch.float32 else "tf32"  # ignored for fp16/bf16
        _conv2d_igemm_kernel[grid](
            x, wp, y, c, cout, oh, ow, kh, kw,
            x.stride(0), x.stride(1), x.stride(2), x.stride(3),
            PRECISION=precision, TILE_H=tile_h, TILE_W=tile_w, BLOCK_M=block_m, BLOCK_K=block_k,
            num_warps=8 if block_m == 128 else 4, num_stages=4,
        )
        return y
