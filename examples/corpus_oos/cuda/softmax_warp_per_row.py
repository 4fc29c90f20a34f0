'''Softmax candidate in CUDA C++ (intent: efficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/softmax.py``: softmax over the last dim of a
(4096, 8192) fp32 tensor.

One warp per row, 4 warps (rows) per 128-thread block. Pass 1: each lane
walks its row in float4 packs (lane-strided, so a warp reads 512 contiguous
bytes per step) keeping a running max and a rescaled running sum (online
softmax); the 32 partial (max, sum) pairs are merged with warp shuffles.
Pass 2 re-reads the row (a 32 KB row, mostly from L2) and writes
exp(x - max) / sum with float4 stores. Close to one DRAM read and one write:
expected near the library. A scalar path handles rows whose length is not a
multiple of 4. Built with load_inline at import, runs on PyTorch's current
stream.
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor softmax_forward(torch::Tensor x, int64_t stream);"

_CUDA = r"""
#include <cstdint>

__device__ __forceinline__ void online_add(float& m, float& s, float v) {
  if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; } else { s += __expf(v - m); }
}

__global__ void softmax_warp_row(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float* yr = y + r * cols;
  const bool vec = (cols % 4 == 0);
  float m = -INFINITY, s = 0.0f;
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int64_t i = lane; i < cols / 4; i += 32) {
      const float4 v = x4[i];
      online_add(m, s, v.x); online_add(m, s, v.y); online_add(m, s, v.z); online_add(m, s, v.w);
    }
  } else {
    for (int64_t j = lane; j < cols; j += 32) online_add(m, s, xr[j]);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
    const float mn = fmaxf(m, m2);
    s = (m == -INFINITY ? 0.0f : s * __expf(m - mn)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mn));
    m = mn;
  }
  const float inv = 1.0f / s;
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float4* y4 = reinterpret_cast<float4*>(yr);
    for (int64_t i = lane; i < cols / 4; i += 32) {
      float4 v = x4[i];
      v.x = __expf(v.x - m) * inv; v.y = __expf(v.y - m) * inv; v.z = __expf(v.z - m) * inv; v.w = __expf(v.w - m) * inv;
      y4[i] = v;
    }
  } else {
    for (int64_t j = lane; j < cols; j += 32) yr[j] = __expf(xr[j] - m) * inv;
  }
}

torch::Tensor softmax_forward(torch::Tensor x, int64_t stream_handle) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "softmax_forward: a CUDA fp32 tensor");
  torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  const int64_t cols = xc.size(-1);
  const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
  if (rows == 0) return y;
  const int rows_per_block = 4;
  softmax_warp_row<<<static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block), 32 * rows_per_block, 0,
                     reinterpret_cast<cudaStream_t>(stream_handle)>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows,
                                                                      cols);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "softmax_forward: launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_ext = load_inline(name="kg_oos_softmax_warp_row", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["softmax_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
        return _ext.softmax_forward(x, stream)
