'''RMSNorm candidate in CUDA C++ (good): one 256-thread block per row, 16-byte loads, fp32 statistics.

y = x * rsqrt(mean(x^2, -1) + eps) * weight, for ``examples/problems/rmsnorm.py``
((4096, 4096) fp32, learnable weight, eps 1e-6). Built with load_inline at import.

Each block owns one row. Pass 1: its threads stride across the row in
16-byte packs (4 fp32 / 8 fp16 or bf16 values), accumulating x^2 in fp32; a
warp-shuffle tree plus one shared-memory step across the 8 warps gives the
sum of squares, so every thread knows the row's scale. Pass 2 re-reads the
row (16 KB at HIDDEN = 4096, still resident in L1/L2, so DRAM sees about one
read and one write of x) together with the weight, and writes
x * scale * weight in the same pack layout. Loads and stores are coalesced
and the 4096 blocks fill every SM: the kernel is memory-bound at close to
DRAM bandwidth.

Dtypes: x in float32, float64, float16 or bfloat16; weight either x's dtype
(output in x's dtype) or float32 (output float32, or float64 for float64 x),
which is what torch's type promotion gives for ``x * ... * weight``. Mixed
dtypes and unaligned rows take a scalar path. The kernel runs on PyTorch's
current stream, whose handle forward passes in (no ATen/c10 CUDA headers).
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps, int64_t stream);"

_CUDA = r"""
#include <cstdint>
#include <type_traits>

template <typename T> struct AccType { using type = float; };
template <> struct AccType<double> { using type = double; };

template <typename T> struct alignas(16) Pack16 { T v[16 / sizeof(T)]; };

constexpr int kThreads = 256;

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
  __syncthreads();
  return v;
}

// kVec: x, weight and y share one dtype, every row starts 16-byte aligned and n is a multiple of the pack.
template <typename scalar_t, typename w_t, typename out_t, bool kVec>
__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(const scalar_t* __restrict__ x, const w_t* __restrict__ w,
                                                            out_t* __restrict__ y, int64_t n, double eps) {
  using acc_t = typename AccType<out_t>::type;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  const scalar_t* xr = x + base;
  out_t* yr = y + base;
  const int64_t stride = blockDim.x;

  acc_t ss = acc_t(0);
  if constexpr (kVec) {
    static_assert(std::is_same_v<scalar_t, w_t> && std::is_same_v<scalar_t, out_t>, "vector path needs one dtype");
    constexpr int V = 16 / sizeof(scalar_t);
    const Pack16<scalar_t>* xp = reinterpret_cast<const Pack16<scalar_t>*>(xr);
    const int64_t npacks = n / V;
    for (int64_t i = threadIdx.x; i < npacks; i += stride) {
      const Pack16<scalar_t> p = xp[i];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const acc_t v = static_cast<acc_t>(p.v[k]);
        ss += v * v;
      }
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += stride) {
      const acc_t v = static_cast<acc_t>(xr[j]);
      ss += v * v;
    }
  }
  ss = block_sum(ss);
  const acc_t scale = acc_t(1) / sqrt(ss / static_cast<acc_t>(n) + static_cast<acc_t>(eps));

  if constexpr (kVec) {
    constexpr int V = 16 / sizeof(scalar_t);
    const Pack16<scalar_t>* xp = reinterpret_cast<const Pack16<scalar_t>*>(xr);
    const Pack16<scalar_t>* wp = reinterpret_cast<const Pack16<scalar_t>*>(w);
    Pack16<scalar_t>* yp = reinterpret_cast<Pack16<scalar_t>*>(yr);
    const int64_t npacks = n / V;
    for (int64_t i = threadIdx.x; i < npacks; i += stride) {
      const Pack16<scalar_t> px = xp[i];
      const Pack16<scalar_t> pw = wp[i];
      Pack16<scalar_t> out;
#pragma unroll
      for (int k = 0; k < V; ++k)
        out.v[k] = static_cast<scalar_t>(static_cast<acc_t>(px.v[k]) * scale * static_cast<acc_t>(pw.v[k]));
      yp[i] = out;
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += stride)
      yr[j] = static_cast<out_t>(static_cast<acc_t>(xr[j]) * scale * static_cast<acc_t>(w[j]));
  }
}

template <typename scalar_t, typename w_t, typename out_t>
static void launch_rmsnorm(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& y, int64_t rows,
                           int64_t n, double eps, cudaStream_t stream) {
  const scalar_t* xp = x.data_ptr<scalar_t>();
  const w_t* wp = w.data_ptr<w_t>();
  out_t* yp = y.data_ptr<out_t>();
  if constexpr (std::is_same_v<scalar_t, w_t> && std::is_same_v<scalar_t, out_t>) {
    const bool vec = n % (16 / sizeof(scalar_t)) == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(wp) % 16 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    if (vec) {
      rmsnorm_kernel<scalar_t, w_t, out_t, true><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(xp, wp, yp, n, eps);
      return;
    }
  }
  rmsnorm_kernel<scalar_t, w_t, out_t, false><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(xp, wp, yp, n, eps);
}

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps, int64_t stream_handle) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "rmsnorm_forward: CUDA tensors expected");
  const int64_t n = weight.numel();
  TORCH_CHECK(n > 0 && x.dim() >= 1 && x.size(-1) == n, "rmsnorm_forward: last dim of x must match weight");
  torch::Tensor xc = x.contiguous();
  torch::Tensor wc = weight.contiguous();
  const bool same = wc.scalar_type() == xc.scalar_type();
  TORCH_CHECK(same || wc.scalar_type() == at::kFloat, "rmsnorm_forward: weight must be float32 or x's dtype");
  const auto out_type = same ? xc.scalar_type() : at::promote_types(xc.scalar_type(), at::kFloat);
  torch::Tensor y = torch::empty(xc.sizes(), xc.options().dtype(out_type));
  const int64_t rows = xc.numel() / n;
  if (rows == 0) return y;
  TORCH_CHECK(rows <= 0x7fffffff, "rmsnorm_forward: too many rows");
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "rmsnorm_forward", [&] {
    using promoted_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    if (same) {
      launch_rmsnorm<scalar_t, scalar_t, scalar_t>(xc, wc, y, rows, n, eps, stream);
    } else {
      launch_rmsnorm<scalar_t, float, promoted_t>(xc, wc, y, rows, n, eps, stream);
    }
  });
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "rmsnorm_forward: launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_ext = load_inline(name="kg_rmsnorm_good_cuda", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["rmsnorm_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
        return _ext.rmsnorm_forward(x, self.weight, self.eps, stream)
