'''Matmul candidate in CUDA C++ (intent: inefficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/matmul.py``: strict fp32 C = A @ B (4096 x 4096 x
4096; TF32 is not allowed).

The classic CUDA-course tiled SGEMM: 16 x 16 thread blocks, each thread
computes ONE element of C, A and B tiles of 16 x 16 staged through shared
memory, one FMA per two shared-memory loads. No register blocking, so the
kernel is bound by shared-memory bandwidth at a small fraction of the fp32
FMA peak; cuBLAS's SGEMM reaches most of it. Expected several times slower
than the library. Built with load_inline at import, runs on PyTorch's
current stream.
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b, int64_t stream);"

_CUDA = r"""
#include <cstdint>
#define TILE 16

__global__ void sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                            int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    const int ka = t * TILE + threadIdx.x;
    const int kb = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[static_cast<int64_t>(row) * K + ka] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[static_cast<int64_t>(kb) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[static_cast<int64_t>(row) * N + col] = acc;
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b, int64_t stream_handle) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
              "matmul_forward: CUDA fp32 tensors");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: shapes (M, K) @ (K, N)");
  torch::Tensor ac = a.contiguous(), bc = b.contiguous();
  const int M = ac.size(0), K = ac.size(1), N = bc.size(1);
  torch::Tensor c = torch::empty({M, N}, ac.options());
  dim3 block(TILE, TILE);
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  sgemm_tiled<<<grid, block, 0, reinterpret_cast<cudaStream_t>(stream_handle)>>>(
      ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "matmul_forward: launch failed: ", cudaGetErrorString(err));
  return c;
}
"""

_ext = load_inline(name="kg_oos_sgemm_smem16", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["matmul_forward"],
                   extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        stream = torch.cuda.current_stream(A.device).cuda_stream if A.is_cuda else 0
        return _ext.matmul_forward(A, B, stream)
