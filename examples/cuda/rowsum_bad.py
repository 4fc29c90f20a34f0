'''Row-sum candidate in CUDA C++ (deliberately bad): correct, but slow.

Defect: a one-thread block per row. The kernel is launched as
``<<<rows, 1>>>`` and the lone thread of each block walks its whole row in a
scalar loop, one 2- or 4-byte load and one dependent add per element:

- 31 of the 32 lanes of every warp are idle, and an SM can hold at most 32
  resident blocks, i.e. 32 active threads, so almost no bytes are in flight
  to cover DRAM latency;
- the loads are scalar, never 16-byte vectors, and the reduction is a serial
  chain of 8192 adds per row.

It runs far below memory bandwidth. The fix is a launch-configuration and
loop-structure repair, as in ``rowsum_good.py``: 256 threads per row striding
across it with coalesced 16-byte loads, then a warp-shuffle/shared-memory
tree reduction.

Dtypes: float32, float64, float16, bfloat16 (fp32 accumulation, double for
float64), via AT_DISPATCH_FLOATING_TYPES_AND2. Runs on PyTorch's current
stream, whose handle forward passes in (no ATen/c10 CUDA headers needed).
'''
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor rowsum_forward(torch::Tensor x, int64_t stream);"

_CUDA = r"""
#include <cstdint>

template <typename T> struct AccType { using type = float; };
template <> struct AccType<double> { using type = double; };

template <typename scalar_t>
__global__ void rowsum_serial_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t cols) {
  using acc_t = typename AccType<scalar_t>::type;
  const scalar_t* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  acc_t acc = acc_t(0);
  for (int64_t j = 0; j < cols; ++j) acc += static_cast<acc_t>(row[j]);
  out[blockIdx.x] = static_cast<scalar_t>(acc);
}

torch::Tensor rowsum_forward(torch::Tensor x, int64_t stream_handle) {
  TORCH_CHECK(x.is_cuda(), "rowsum_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.dim() >= 1, "rowsum_forward: x must have at least one dim");
  torch::Tensor xc = x.contiguous();
  const int64_t cols = xc.size(-1);
  auto out_sizes = xc.sizes().vec();
  out_sizes.pop_back();
  torch::Tensor out = torch::empty(out_sizes, xc.options());
  if (cols == 0) return out.zero_();
  const int64_t rows = xc.numel() / cols;
  if (rows == 0) return out;
  TORCH_CHECK(rows <= 0x7fffffff, "rowsum_forward: too many rows");
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "rowsum_forward", [&] {
    rowsum_serial_kernel<scalar_t><<<static_cast<unsigned>(rows), 1, 0, stream>>>(
        xc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), cols);
  });
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "rowsum_forward: launch failed: ", cudaGetErrorString(err));
  return out;
}
"""

_ext = load_inline(name="kg_rowsum_bad_cuda", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["rowsum_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
        return _ext.rowsum_forward(x, stream)
