'''Matmul candidate in CUDA C++ (intent: inefficient), written 2026-12-04 before any timing.

Problem: ``examples/problems/matmul_fp16.py``: C = A @ B, fp16 (4096 x 4096 x
4096), fp16 output.

The WMMA "hello world": each warp computes one 16 x 16 tile of C, loading
its 16 x 16 A and B fragments straight from global memory
(wmma::load_matrix_sync on global pointers) for each of the K / 16 steps,
accumulating in fp32 and storing through a per-warp shared-memory tile to
convert to fp16. Tensor cores are used, but there is no shared-memory reuse
across warps, no double buffering and only legacy mma.sync (not wgmma):
each operand element is fetched from L2 256 times. Expected several times
slower than cuBLAS. Requires M, N, K multiples of 16 (checked). Built with
load_inline at import, runs on PyTorch's current stream.
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b, int64_t stream);"

_CUDA = r"""
#include <cstdint>
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

constexpr int kWarps = 4;  // 4 warps per block: a 16 x 64 strip of C

__global__ void wmma_gemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                          int M, int N, int K) {
  __shared__ float stage[kWarps][16 * 16];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int tile_m = blockIdx.y * 16;
  const int tile_n = (blockIdx.x * kWarps + warp) * 16;
  if (tile_n >= N) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + static_cast<int64_t>(tile_m) * K + k, K);
    wmma::load_matrix_sync(b, B + static_cast<int64_t>(k) * N + tile_n, N);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(stage[warp], acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int i = lane; i < 256; i += 32) {
    const int r = i / 16, c = i % 16;
    C[static_cast<int64_t>(tile_m + r) * N + tile_n + c] = __float2half(stage[warp][i]);
  }
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b, int64_t stream_handle) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kHalf && b.scalar_type() == torch::kHalf,
              "matmul_forward: CUDA fp16 tensors");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: shapes (M, K) @ (K, N)");
  torch::Tensor ac = a.contiguous(), bc = b.contiguous();
  const int M = ac.size(0), K = ac.size(1), N = bc.size(1);
  TORCH_CHECK(M % 16 == 0 && N % 16 == 0 && K % 16 == 0, "matmul_forward: M, N, K must be multiples of 16");
  torch::Tensor c = torch::empty({M, N}, ac.options());
  dim3 grid((N / 16 + kWarps - 1) / kWarps, M / 16);
  wmma_gemm<<<grid, 32 * kWarps, 0, reinterpret_cast<cudaStream_t>(stream_handle)>>>(
      reinterpret_cast<const half*>(ac.data_ptr<at::Half>()), reinterpret_cast<const half*>(bc.data_ptr<at::Half>()),
      reinterpret_cast<half*>(c.data_ptr<at::Half>()), M, N, K);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "matmul_forward: launch failed: ", cudaGetErrorString(err));
  return c;
}
"""

_ext = load_inline(name="kg_oos_wmma_global", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["matmul_forward"],
                   extra_cuda_cflags=["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__"],
                   verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        stream = torch.cuda.current_stream(A.device).cuda_stream if A.is_cuda else 0
        return _ext.matmul_forward(A, B, stream)
