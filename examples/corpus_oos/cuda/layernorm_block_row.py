'''LayerNorm candidate in CUDA C++ (intent: efficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/layernorm.py``: nn.LayerNorm over the last dim of
a (4096, 4096) fp32 tensor, weight and bias, eps 1e-5.

One 256-thread block per row. The row is read once with float4 loads into
registers (up to 8 packs = 32 values per thread, i.e. rows of up to 8192);
the mean is a block reduction (warp shuffles plus a shared-memory step), the
variance a second block reduction over the centered register values (exact
two-pass), then the normalized row times weight plus bias is written with
float4 stores. One DRAM read and one write of x: expected on par with
PyTorch's fused kernel. Rows that are longer, or not a multiple of 4, are
refused with an error (written for the problem's shape). Built with
load_inline at import, runs on PyTorch's current stream.
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps, int64_t stream);"

_CUDA = r"""
#include <cstdint>

constexpr int kThreads = 256;
constexpr int kMaxPacks = 8;

__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < (kThreads / 32) ? shared[lane] : 0.0f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  return v;
}

__global__ void __launch_bounds__(kThreads) layernorm_row(const float* __restrict__ x, const float* __restrict__ w,
                                                          const float* __restrict__ b, float* __restrict__ y,
                                                          int cols, float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x + row * cols);
  float4* y4 = reinterpret_cast<float4*>(y + row * cols);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  const int packs = cols / 4;
  float4 v[kMaxPacks];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPacks; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < packs) { v[k] = x4[i]; sum += v[k].x + v[k].y + v[k].z + v[k].w; }
  }
  const float mean = block_sum(sum, shared) / cols;
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPacks; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < packs) {
      v[k].x -= mean; v[k].y -= mean; v[k].z -= mean; v[k].w -= mean;
      sq += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    }
  }
  const float rstd = rsqrtf(block_sum(sq, shared) / cols + eps);
#pragma unroll
  for (int k = 0; k < kMaxPacks; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < packs) {
      const float4 ww = w4[i], bb = b4[i];
      float4 o;
      o.x = v[k].x * rstd * ww.x + bb.x; o.y = v[k].y * rstd * ww.y + bb.y;
      o.z = v[k].z * rstd * ww.z + bb.z; o.w = v[k].w * rstd * ww.w + bb.w;
      y4[i] = o;
    }
  }
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps, int64_t stream_handle) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "layernorm_forward: a CUDA fp32 tensor");
  const int64_t cols = w.numel();
  TORCH_CHECK(cols % 4 == 0 && cols <= 4 * kMaxPacks * kThreads, "layernorm_forward: needs N % 4 == 0 and N <= 8192");
  torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  const int64_t rows = xc.numel() / cols;
  if (rows == 0) return y;
  layernorm_row<<<static_cast<unsigned>(rows), kThreads, 0, reinterpret_cast<cudaStream_t>(stream_handle)>>>(
      xc.data_ptr<float>(), w.contiguous().data_ptr<float>(), b.contiguous().data_ptr<float>(), y.data_ptr<float>(),
      static_cast<int>(cols), static_cast<float>(eps));
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "layernorm_forward: launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_ext = load_inline(name="kg_oos_layernorm_block_row", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["layernorm_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape)

    def forward(self, x):
        stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
        return _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps, stream)
