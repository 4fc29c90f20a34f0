'''Row-sum candidate in CUDA C++ (good): one 256-thread block per row, 16-byte loads, fp32 accumulation.

Built with torch.utils.cpp_extension.load_inline at import. Each block owns
one row: its threads stride across the row in 16-byte packs (4 fp32 or 8
fp16/bf16 values), four independent packs in flight per thread per loop
trip, each added into its own fp32 accumulator. A warp-shuffle tree plus one
shared-memory step across the 8 warps then reduces the block, and thread 0
stores the total in the input dtype. Loads are fully coalesced and the grid
(one block per row, 4096 rows) fills every SM, so the kernel runs at memory
bandwidth.

Rows whose start is not 16-byte aligned (or whose length is not a multiple
of the pack) take a scalar path with the same reduction. Dtypes: float32,
float64 (double accumulation), float16 and bfloat16 (fp32 accumulation) via
AT_DISPATCH_FLOATING_TYPES_AND2. The kernel runs on PyTorch's current CUDA
stream, whose handle forward passes in from Python
(``torch.cuda.current_stream().cuda_stream``): the C++ side includes no
ATen/c10 CUDA headers, so the source also compiles against a CPU-only torch
wheel (whose ATen/cuda/CUDAContext.h needs cuBLAS/cuSPARSE headers and whose
c10/cuda headers lack the generated cuda_cmake_macros.h).
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor rowsum_forward(torch::Tensor x, int64_t stream);"

_CUDA = r"""
#include <cstdint>

template <typename T> struct AccType { using type = float; };
template <> struct AccType<double> { using type = double; };

template <typename T> struct alignas(16) Pack16 { T v[16 / sizeof(T)]; };

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block; every thread gets the total.
template <typename acc_t>
__device__ __forceinline__ acc_t block_sum(acc_t v) {
  __shared__ acc_t partial[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? partial[lane] : acc_t(0);
  v = warp_sum(v);
  __syncthreads();  // partial[] may be reused by a later call
  return v;
}

template <typename scalar_t, bool kVec>
__global__ void __launch_bounds__(kThreads) rowsum_kernel(const scalar_t* __restrict__ x,
                                                           scalar_t* __restrict__ out, int64_t cols) {
  using acc_t = typename AccType<scalar_t>::type;
  const scalar_t* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t stride = blockDim.x;
  acc_t acc[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) acc[u] = acc_t(0);

  int64_t scalar_from = 0;
  if (kVec) {
    constexpr int V = 16 / sizeof(scalar_t);
    const Pack16<scalar_t>* packs = reinterpret_cast<const Pack16<scalar_t>*>(row);
    const int64_t npacks = cols / V;
    int64_t i = threadIdx.x;
    for (; i + (kUnroll - 1) * stride < npacks; i += kUnroll * stride) {
      Pack16<scalar_t> p[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) p[u] = packs[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) acc[u] += static_cast<acc_t>(p[u].v[k]);
    }
    for (; i < npacks; i += stride) {
      const Pack16<scalar_t> p = packs[i];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[0] += static_cast<acc_t>(p.v[k]);
    }
    scalar_from = npacks * V;
  }
  for (int64_t j = scalar_from + threadIdx.x; j < cols; j += stride) acc[0] += static_cast<acc_t>(row[j]);

  acc_t total = acc[0];
#pragma unroll
  for (int u = 1; u < kUnroll; ++u) total += acc[u];
  total = block_sum(total);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<scalar_t>(total);
}

torch::Tensor rowsum_forward(torch::Tensor x, int64_t stream_handle) {
  TORCH_CHECK(x.is_cuda(), "rowsum_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.dim() >= 1, "rowsum_forward: x must have at least one dim");
  torch::Tensor xc = x.contiguous();
  const int64_t cols = xc.size(-1);
  auto out_sizes = xc.sizes().vec();
  out_sizes.pop_back();
  torch::Tensor out = torch::empty(out_sizes, xc.options());
  const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
  if (cols == 0) return out.zero_();
  if (rows == 0) return out;
  TORCH_CHECK(rows <= 0x7fffffff, "rowsum_forward: too many rows");
  const bool vec = (reinterpret_cast<uintptr_t>(xc.data_ptr()) % 16 == 0) &&
                   ((cols * static_cast<int64_t>(xc.element_size())) % 16 == 0);
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "rowsum_forward", [&] {
    const scalar_t* xp = xc.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    if (vec) {
      rowsum_kernel<scalar_t, true><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(xp, op, cols);
    } else {
      rowsum_kernel<scalar_t, false><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(xp, op, cols);
    }
  });
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "rowsum_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}
"""

_ext = load_inline(name="kg_rowsum_good_cuda", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["rowsum_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
        return _ext.rowsum_forward(x, stream)
