'''Softmax candidate in CUDA C++ (intent: inefficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/softmax.py``: softmax over the last dim of a
(4096, 8192) fp32 tensor.

"One thread per row": thread r walks row r three times (max, sum of exp,
normalize and write), one element at a time. The 32 threads of a warp read 32
rows 32 KB apart, so every warp load touches 32 cache lines for 128 useful
bytes; 4096 threads in all occupy a handful of SMs; the sums are serial
chains of 8192 adds. Expected one to two orders of magnitude slower than the
library. Built with load_inline at import, runs on PyTorch's current stream.
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor softmax_forward(torch::Tensor x, int64_t stream);"

_CUDA = r"""
#include <cstdint>

__global__ void softmax_row_per_thread(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float* yr = y + r * cols;
  float m = -INFINITY;
  for (int64_t j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
  float s = 0.0f;
  for (int64_t j = 0; j < cols; ++j) s += expf(xr[j] - m);
  const float inv = 1.0f / s;
  for (int64_t j = 0; j < cols; ++j) yr[j] = expf(xr[j] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x, int64_t stream_handle) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "softmax_forward: a CUDA fp32 tensor");
  torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  const int64_t cols = xc.size(-1);
  const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
  if (rows == 0) return y;
  const int threads = 128;
  softmax_row_per_thread<<<static_cast<unsigned>((rows + threads - 1) / threads), threads, 0,
                           reinterpret_cast<cudaStream_t>(stream_handle)>>>(xc.data_ptr<float>(), y.data_ptr<float>(),
                                                                            rows, cols);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "softmax_forward: launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_ext = load_inline(name="kg_oos_softmax_thread_row", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["softmax_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
        return _ext.softmax_forward(x, stream)
