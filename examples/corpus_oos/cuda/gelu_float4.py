'''GELU candidate in CUDA C++ (intent: efficient), written 2026-12-04 before any timing.

Problem: catalogue op ``gelu`` (fp32, rows=4096 x cols=16384), exact erf form
y = 0.5 * x * (1 + erf(x / sqrt(2))).

A grid-stride loop over float4 packs (16-byte loads and stores), 256 threads
per block, enough blocks for 8 per SM, erff in fp32; a scalar tail handles a
length that is not a multiple of 4 (the pointer from torch.empty is 16-byte
aligned). One read and one write per element: expected at HBM bandwidth like
the library. Built with load_inline at import; the kernel runs on PyTorch's
current stream, whose handle forward passes in (no ATen CUDA headers, so it
also compiles against a CPU-only torch).
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor gelu_forward(torch::Tensor x, int64_t stream);"

_CUDA = r"""
#include <cstdint>

__device__ __forceinline__ float gelu_f(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

__global__ void gelu_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t n4 = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x4[i];
    v.x = gelu_f(v.x); v.y = gelu_f(v.y); v.z = gelu_f(v.z); v.w = gelu_f(v.w);
    y4[i] = v;
  }
  for (int64_t i = n4 * 4 + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = gelu_f(x[i]);
}

torch::Tensor gelu_forward(torch::Tensor x, int64_t stream_handle) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu_forward: a CUDA fp32 tensor");
  torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  int64_t blocks = (n / 4 + 255) / 256;
  if (blocks > static_cast<int64_t>(sms) * 8) blocks = static_cast<int64_t>(sms) * 8;
  if (blocks < 1) blocks = 1;
  gelu_vec4_kernel<<<static_cast<unsigned>(blocks), 256, 0, reinterpret_cast<cudaStream_t>(stream_handle)>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), n);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "gelu_forward: launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_ext = load_inline(name="kg_oos_gelu_float4", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["gelu_forward"],
                   extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
        return _ext.gelu_forward(x, stream)
