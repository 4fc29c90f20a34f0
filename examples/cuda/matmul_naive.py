'''Matmul candidate in CUDA C++ (deliberately naive): correct, but slow.

Defect: one thread per output element, global loads only. A 16 x 16 block
covers a 16 x 16 tile of C; each thread runs the whole K loop reading
A[row, k] and B[k, col] straight from global memory into one fp32 FMA. There
is no shared-memory tiling and no register blocking: every FMA needs two
loads (a warp's A load is a broadcast, its B load a 64-byte row segment), so
the kernel is bound by L1/L2 load throughput at a few percent of the FP32
FMA peak, and no tensor cores are used.

On (4096, 4096, 4096) it is one to two orders of magnitude slower than
cuBLAS. The fix is ``matmul_good.py``: stage A and B slices in shared memory,
give each thread an 8 x 8 register tile (64 FMAs per 4 shared loads), and
double-buffer the slices.

Dtypes: float32, float64 (double accumulation), float16, bfloat16 (fp32
accumulation, output in the input dtype). Runs on PyTorch's current stream,
whose handle forward passes in (no ATen/c10 CUDA headers needed).
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B, int64_t stream);"

_CUDA = r"""
#include <cstdint>

template <typename T> struct AccType { using type = float; };
template <> struct AccType<double> { using type = double; };

constexpr int kTile = 16;

template <typename scalar_t>
__global__ void matmul_naive_kernel(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B,
                                    scalar_t* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  if (row >= M || col >= N) return;
  acc_t acc = acc_t(0);
  for (int64_t k = 0; k < K; ++k)
    acc += static_cast<acc_t>(A[row * K + k]) * static_cast<acc_t>(B[k * N + col]);
  C[row * N + col] = static_cast<scalar_t>(acc);
}

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B, int64_t stream_handle) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda(), "matmul_forward: CUDA tensors expected");
  TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "matmul_forward: (M, K) @ (K, N) expected");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "matmul_forward: A and B must share a dtype");
  torch::Tensor a = A.contiguous();
  torch::Tensor b = B.contiguous();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  torch::Tensor c = torch::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile), static_cast<unsigned>((M + kTile - 1) / kTile));
  TORCH_CHECK(grid.y <= 65535, "matmul_forward: M too large for this grid");
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "matmul_forward", [&] {
    matmul_naive_kernel<scalar_t><<<grid, block, 0, stream>>>(a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                                                              c.data_ptr<scalar_t>(), M, N, K);
  });
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "matmul_forward: launch failed: ", cudaGetErrorString(err));
  return c;
}
"""

_ext = load_inline(name="kg_matmul_naive_cuda", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["matmul_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        stream = torch.cuda.current_stream(A.device).cuda_stream if A.is_cuda else 0
        return _ext.matmul_forward(A, B, stream)
