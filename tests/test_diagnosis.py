"""Tests for kernelgate.diagnosis: every rule fires on its defect and stays quiet without it."""

from __future__ import annotations

import pytest

from kernelgate.diagnosis import DEFAULT_SM_COUNT, diagnose
from kernelgate.hardware import MathMode
from kernelgate.models import Cost, KernelArtifact

MiB = 1 << 20

VECTOR_PTX = """
.visible .entry k(.param .u64 k_param_0)
{
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
    add.f32 %f5, %f1, %f2;
    st.global.v4.f32 [%rd2], {%f5, %f2, %f3, %f4};
    ret;
}
"""

SCALAR_PTX = """
.visible .entry k(.param .u64 k_param_0)
{
    ld.global.f32 %f1, [%rd1];
    ld.global.f32 %f2, [%rd1+4];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd2], %f3;
    ret;
}
"""

FP64_PTX = VECTOR_PTX.replace("add.f32 %f5, %f1, %f2;",
                              "cvt.f64.f32 %fd1, %f1;\n    add.f64 %fd2, %fd1, %fd1;\n    mul.f64 %fd3, %fd2, %fd2;")

MMA_PTX = VECTOR_PTX + "\n    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2}, {%r3}, {%f1,%f2,%f3,%f4};\n"
WGMMA_PTX = VECTOR_PTX + "\n    wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%f1}, %rd5, %rd6, 1, 1, 1, 0, 0;\n"


def _kernel(name: str = "k", **over) -> KernelArtifact:
    """A kernel with no defect: 4 warps, 1024-wide blocks, vector loads, a full grid, no spills."""
    fields = dict(name=name, dsl="triton", target="cuda:90", launches=1, num_warps=4, num_stages=3,
                  shared_bytes=0, registers=32, spill_bytes=0, grid=[4096, 1, 1], constexprs={"BLOCK_SIZE": 1024},
                  asm={"ptx": VECTOR_PTX})
    fields.update(over)
    return KernelArtifact(**fields)


def _memory_cost(nbytes: float = 128 * MiB, intensity: float = 1.0, mode: MathMode = MathMode.fp32) -> Cost:
    return Cost(flops=intensity * nbytes, bytes_compulsory=nbytes, math_mode=mode, peak_mode=mode,
                estimate="catalogue:test")


def _gemm_cost(mode: MathMode, n: int = 4096) -> Cost:
    elem = 4 if mode is MathMode.fp32 else 2
    return Cost(flops=2.0 * n**3, bytes_compulsory=3.0 * n * n * elem, math_mode=mode,
                peak_mode=MathMode.tf32 if mode is MathMode.fp32 else mode, estimate="catalogue:matmul")


def _codes(findings) -> list[str]:
    return [f.code for f in findings]


def _only(findings, code: str):
    """The one finding with ``code`` (fails if there are none or several)."""
    (found,) = [f for f in findings if f.code == code]
    return found


def test_clean_kernel_has_no_findings():
    assert diagnose([_kernel()], _memory_cost()) == []
    assert diagnose([], _memory_cost()) == []
    assert diagnose([_kernel()], None) == []


# --- tiny_block ------------------------------------------------------------------------------


def test_tiny_block_fires():
    k = _kernel(num_warps=1, constexprs={"BLOCK_SIZE": 32, "N": 4096})
    findings = diagnose([k], _memory_cost())
    assert _codes(findings) == ["tiny_block"]
    f = findings[0]
    assert f.kind == "repairable" and f.kernel == "k"
    assert "32" in f.evidence


@pytest.mark.parametrize("over", [
    {"num_warps": 4, "constexprs": {"BLOCK_SIZE": 32}},      # enough warps
    {"num_warps": 1, "constexprs": {"BLOCK_SIZE": 128}},     # block big enough
    {"num_warps": 1, "constexprs": {"BLOCK_M": 16, "BLOCK_N": 128}},  # largest block counts
    {"num_warps": 1, "constexprs": {"N": 32}},               # no BLOCK* constant
    {"num_warps": None, "constexprs": {"BLOCK": 16}},        # unknown warps
])
def test_tiny_block_does_not_fire(over):
    assert "tiny_block" not in _codes(diagnose([_kernel(**over)], _memory_cost()))


def test_tiny_block_matches_block_prefix_case_insensitively():
    k = _kernel(num_warps=1, constexprs={"block": 64})
    assert _codes(diagnose([k], _memory_cost())) == ["tiny_block"]


# --- scalar_global_loads ---------------------------------------------------------------------


def test_scalar_global_loads_fires():
    findings = diagnose([_kernel(asm={"ptx": SCALAR_PTX})], _memory_cost())
    assert _codes(findings) == ["scalar_global_loads"]
    assert findings[0].evidence.startswith("2 ld.global")


@pytest.mark.parametrize("ptx", [
    VECTOR_PTX,                                              # ld.global.v4.f32
    SCALAR_PTX + "\n    ld.global.v2.f32 {%f7, %f8}, [%rd3];",  # one vector load is enough
    "ld.global.nc.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];",     # qualifiers before .v4
    "add.f32 %f1, %f2, %f3;",                                # no global load at all
    "",
])
def test_scalar_global_loads_does_not_fire(ptx):
    assert "scalar_global_loads" not in _codes(diagnose([_kernel(asm={"ptx": ptx})], _memory_cost()))


def test_no_ptx_artifact_means_no_load_finding():
    assert diagnose([_kernel(asm={})], _memory_cost()) == []


# --- too_few_blocks --------------------------------------------------------------------------


def test_too_few_blocks_for_large_problem():
    findings = diagnose([_kernel(grid=[64, 1, 1])], _memory_cost(128 * MiB))
    assert _codes(findings) == ["too_few_blocks"]
    assert "64 programs" in findings[0].evidence and str(DEFAULT_SM_COUNT) in findings[0].evidence


def test_too_few_blocks_not_for_small_problem():
    assert diagnose([_kernel(grid=[64, 1, 1])], _memory_cost(32 * MiB)) == []
    assert diagnose([_kernel(grid=[64, 1, 1])], _memory_cost(64 * MiB)) == []  # threshold is strict
    assert diagnose([_kernel(grid=[64, 1, 1])], None) == []


def test_too_few_blocks_counts_all_grid_dimensions():
    assert diagnose([_kernel(grid=[16, 16, 1])], _memory_cost()) == []  # 256 programs
    assert _codes(diagnose([_kernel(grid=[8, 8, 1])], _memory_cost())) == ["too_few_blocks"]


def test_too_few_blocks_uses_given_sm_count():
    k = _kernel(grid=[100])
    assert _codes(diagnose([k], _memory_cost())) == ["too_few_blocks"]   # 100 < 132
    assert diagnose([k], _memory_cost(), sm_count=80) == []              # 100 >= 80
    assert _codes(diagnose([_kernel(grid=[200])], _memory_cost(), sm_count=256)) == ["too_few_blocks"]


def test_too_few_blocks_needs_a_grid():
    assert diagnose([_kernel(grid=None)], _memory_cost()) == []


# --- register_spills -------------------------------------------------------------------------


def test_register_spills_fires():
    findings = diagnose([_kernel(spill_bytes=256, registers=255)], _memory_cost())
    assert _codes(findings) == ["register_spills"]
    assert "256 bytes" in findings[0].evidence and "255 registers" in findings[0].evidence


@pytest.mark.parametrize("spill", [0, None])
def test_register_spills_does_not_fire(spill):
    assert diagnose([_kernel(spill_bytes=spill)], _memory_cost()) == []


# --- GEMM-like kernels -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", [MathMode.fp16, MathMode.bf16])
def test_no_tensor_cores_for_half_gemm(mode):
    findings = diagnose([_kernel(shared_bytes=49152)], _gemm_cost(mode))
    assert _codes(findings) == ["no_tensor_cores"]


@pytest.mark.parametrize("asm", [{"ptx": MMA_PTX}, {"ptx": WGMMA_PTX}, {"ptx": VECTOR_PTX, "sass": "HMMA.16816.F32"},
                                 {"ptx": VECTOR_PTX, "sass": "HGMMA.64x128x16.F32"}])
def test_half_gemm_with_tensor_cores_is_fine(asm):
    assert diagnose([_kernel(shared_bytes=49152, asm=asm)], _gemm_cost(MathMode.fp16)) == []


def test_a_layout_pass_beside_the_tensor_core_gemm_is_not_a_gemm():
    layout_pass = _kernel(name="to_nhwc", shared_bytes=0)
    gemm = _kernel(name="conv", shared_bytes=49152, asm={"ptx": WGMMA_PTX})
    assert diagnose([layout_pass, gemm], _gemm_cost(MathMode.fp16)) == []
    assert _codes(diagnose([layout_pass, _kernel(name="conv", shared_bytes=49152)], _gemm_cost(MathMode.fp16))) == [
        "no_tensor_cores", "no_tensor_cores"]


def test_half_gemm_with_tensor_cores_but_no_shared_memory():
    assert _codes(diagnose([_kernel(shared_bytes=0, asm={"ptx": MMA_PTX})], _gemm_cost(MathMode.fp16))) == [
        "no_shared_memory_tiling"]


def test_fp32_gemm_without_shared_memory_gets_tiling_not_tensor_cores():
    findings = diagnose([_kernel(shared_bytes=0)], _gemm_cost(MathMode.fp32))
    assert _codes(findings) == ["no_shared_memory_tiling"]
    assert "no_tensor_cores" not in _codes(findings)


@pytest.mark.parametrize("shared", [0, None])
def test_fp32_gemm_no_shared_bytes_fires(shared):
    assert _codes(diagnose([_kernel(shared_bytes=shared)], _gemm_cost(MathMode.fp32))) == ["no_shared_memory_tiling"]


def test_fp32_gemm_with_shared_memory_is_fine():
    assert diagnose([_kernel(shared_bytes=65536)], _gemm_cost(MathMode.fp32)) == []


def test_gemm_rules_need_arithmetic_intensity():
    # fp16, no mma, no shared memory, but memory-bound (intensity 1): neither rule applies
    assert diagnose([_kernel()], _memory_cost(mode=MathMode.fp16)) == []
    assert diagnose([_kernel()], _memory_cost(intensity=32.0, mode=MathMode.fp16)) == []  # strict > 32
    assert _codes(diagnose([_kernel()], _memory_cost(intensity=33.0, mode=MathMode.fp16))) == ["no_tensor_cores"]


# --- fp64_arithmetic -------------------------------------------------------------------------


def test_fp64_arithmetic_fires():
    findings = diagnose([_kernel(asm={"ptx": FP64_PTX})], _memory_cost())
    assert _codes(findings) == ["fp64_arithmetic"]
    assert findings[0].evidence.startswith("2 fp64 arithmetic instructions")


def test_fp64_arithmetic_does_not_fire():
    assert diagnose([_kernel(asm={"ptx": VECTOR_PTX})], _memory_cost()) == []
    # a conversion of a double argument and one scalar op among much fp32 work is not the defect
    scalar_epilogue = VECTOR_PTX + "\n    cvt.rn.f32.f64 %f9, %fd1;\n    sqrt.rn.f64 %fd2, %fd1;" + \
        "\n    fma.rn.f32 %f6, %f1, %f2, %f3;" * 20
    assert diagnose([_kernel(asm={"ptx": scalar_epilogue})], _memory_cost()) == []
    # without a cost the rule stays quiet
    assert diagnose([_kernel(asm={"ptx": FP64_PTX})], None) == []


# --- extra_passes ----------------------------------------------------------------------------


def test_extra_passes_for_memory_bound_problem():
    kernels = [_kernel("mean", launches=1), _kernel("var", launches=1), _kernel("norm", launches=1)]
    findings = diagnose(kernels, _memory_cost())
    assert _codes(findings) == ["extra_passes"]
    assert findings[0].kernel is None
    assert "3 kernel launches" in findings[0].evidence and "var x1" in findings[0].evidence


def test_extra_passes_counts_repeat_launches():
    assert _codes(diagnose([_kernel(launches=3)], _memory_cost())) == ["extra_passes"]


def test_extra_passes_does_not_fire():
    assert diagnose([_kernel(launches=2)], _memory_cost()) == []
    assert diagnose([_kernel("a"), _kernel("b")], _memory_cost()) == []
    # compute-bound problems may need several passes
    assert diagnose([_kernel(launches=3, shared_bytes=49152, asm={"ptx": MMA_PTX})], _gemm_cost(MathMode.fp16)) == []
    assert diagnose([_kernel(launches=3)], _memory_cost(intensity=8.0)) == []  # strict < 8
    assert diagnose([_kernel(launches=3)], None) == []


# --- helper kernels --------------------------------------------------------------------------


def _bad_small_kernel(**over) -> KernelArtifact:
    fields = dict(num_warps=1, constexprs={"BLOCK_SIZE": 32}, grid=[1, 1, 1], spill_bytes=64,
                  asm={"ptx": SCALAR_PTX + "\n    add.f64 %fd1, %fd2, %fd3;"})
    fields.update(over)
    return _kernel("combine", **fields)


def test_helper_kernel_beside_wide_kernel_gets_only_spills_and_fp64():
    findings = diagnose([_kernel("partial"), _bad_small_kernel()], _memory_cost())
    assert sorted(_codes(findings)) == ["fp64_arithmetic", "register_spills"]
    assert all(f.kernel == "combine" for f in findings)


def test_same_small_kernel_alone_gets_every_finding():
    findings = diagnose([_bad_small_kernel()], _memory_cost())
    assert set(_codes(findings)) == {"tiny_block", "scalar_global_loads", "too_few_blocks", "register_spills",
                                     "fp64_arithmetic"}


def test_helper_status_depends_on_sm_count():
    # with 8 SMs a 16-program kernel fills the GPU itself: it is no helper
    small = _bad_small_kernel(grid=[16])
    wide = _kernel("partial", grid=[4096])
    assert sorted(_codes(diagnose([wide, small], _memory_cost()))) == ["fp64_arithmetic", "register_spills"]
    codes = _codes(diagnose([wide, small], _memory_cost(), sm_count=8))
    assert "tiny_block" in codes and "scalar_global_loads" in codes


def test_two_small_kernels_are_not_helpers():
    findings = diagnose([_bad_small_kernel(), _bad_small_kernel(grid=[2])], _memory_cost())
    assert _codes(findings).count("tiny_block") == 2


@pytest.mark.parametrize("dsl,word", [("triton", "tl.arange"), ("tilelang", "T.copy"), ("cuda", "float4")])
def test_hints_speak_the_candidate_dsl(dsl, word):
    (finding,) = diagnose([_kernel(dsl=dsl, asm={"ptx": SCALAR_PTX})], _memory_cost())
    assert word in finding.hint


# --- hand-made artifacts for the rules that read TTGIR, generated CUDA and CUDA sources ------
#
# Each snippet is cut down from a real artifact of the kind (tests/test_diagnosis_artifacts.py has
# the real ones): only the lines a rule reads, with the #loc table that leads back to the
# candidate's lines.

TTGIR_LOCS = """
#loc = loc("/tmp/kernelgate-x/candidate.py":10:0)
#loc1 = loc(unknown)
#loc10 = loc("/tmp/kernelgate-x/candidate.py":17:4)
#loc11 = loc("/tmp/kernelgate-x/candidate.py":18:20)
#loc12 = loc("/site-packages/triton/language/standard.py":293:36)
#loc13 = loc("total"(#loc10))
#loc14 = loc(callsite(#loc12 at #loc11))
"""

TTGIR_CHUNK_SERIAL = """#blocked = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [2], order = [0]}>
module attributes {"ttg.num-warps" = 2 : i32} {
  tt.func public @k(%x_ptr: !tt.ptr<f32>, %N: i32) {
    %cst = arith.constant 0.000000e+00 : f32 loc(#loc1)
    %total = scf.for %s = %c0 to %N step %c64 iter_args(%t = %cst) -> (f32)  : i32 {
      %x = tt.load %p : tensor<64x!tt.ptr<f32>, #blocked> loc(#loc11)
      %r = "tt.reduce"(%x) <{axis = 0 : i32}> ({
      ^bb0(%a: f32 loc(unknown), %b: f32 loc(unknown)):
        %c = arith.addf %a, %b : f32 loc(#loc14)
        tt.reduce.return %c : f32 loc(#loc14)
      }) : (tensor<64xf32, #blocked>) -> f32 loc(#loc14)
      %t2 = arith.addf %t, %r : f32 loc(#loc11)
      scf.yield %t2 : f32 loc(#loc11)
    } loc(#loc13)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
""" + TTGIR_LOCS

TTGIR_SCALAR_LOOP = """module attributes {"ttg.num-warps" = 1 : i32} {
  tt.func public @k(%x_ptr: !tt.ptr<f32>, %N: i32) {
    %acc = scf.for %i = %c1 to %N step %c1 iter_args(%a = %x0) -> (f32)  : i32 {
      %p = tt.addptr %x_ptr, %i : !tt.ptr<f32>, i32 loc(#loc11)
      %v = tt.load %p : !tt.ptr<f32> loc(#loc11)
      %a2 = arith.addf %a, %v : f32 loc(#loc11)
      scf.yield %a2 : f32 loc(#loc11)
    } loc(#loc13)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
""" + TTGIR_LOCS

TTGIR_VECTOR_ACCUMULATOR = TTGIR_CHUNK_SERIAL.replace("-> (f32)", "-> (tensor<64xf32, #blocked>)")


def _ttgir_kernel(ttgir: str, **over) -> KernelArtifact:
    return _kernel(asm={"ptx": VECTOR_PTX, "ttgir": ttgir}, **over)


def test_serial_reduction_triton_chain_of_small_reductions():
    findings = diagnose([_ttgir_kernel(TTGIR_CHUNK_SERIAL, num_warps=2)], _memory_cost(intensity=0.25))
    assert _codes(findings) == ["serial_reduction"]
    assert findings[0].evidence.startswith("line 17: the loop carries a scalar f32 and reduces a 64-element tensor")
    assert "(64 elements on 64 threads)" in findings[0].evidence


def test_serial_reduction_triton_one_scalar_load_per_iteration():
    findings = diagnose([_ttgir_kernel(TTGIR_SCALAR_LOOP, num_warps=1, constexprs={})], _memory_cost(intensity=0.25))
    assert "serial_reduction" in _codes(findings)
    assert _only(findings, "serial_reduction").evidence.startswith("line 17: the loop adds one scalar f32 load")


@pytest.mark.parametrize("ttgir,warps,intensity", [
    (TTGIR_CHUNK_SERIAL, 1, 0.25),          # 64 elements on 32 threads: two per thread, a real tree
    (TTGIR_VECTOR_ACCUMULATOR, 2, 0.25),    # lane-wise vector accumulator
    (TTGIR_CHUNK_SERIAL, 2, 8.0),           # not a memory-bound reduction problem
])
def test_serial_reduction_triton_does_not_fire(ttgir, warps, intensity):
    assert "serial_reduction" not in _codes(diagnose([_ttgir_kernel(ttgir, num_warps=warps)],
                                                     _memory_cost(intensity=intensity)))


def test_serial_reduction_needs_a_cost():
    assert diagnose([_ttgir_kernel(TTGIR_CHUNK_SERIAL, num_warps=2)], None) == []


TL_SERIAL = """extern "C" __global__ void __launch_bounds__(128, 1) k(const float* __restrict__ X, float* __restrict__ Y) {
  float acc[1];
  acc[0] = 0x0p+0f;
  for (int j = 0; j < 512; ++j) {
    acc[0] = (acc[0] + X[(((((int)blockIdx.x) * 65536) + (((int)threadIdx.x) * 512)) + j)]);
  }
  Y[((((int)blockIdx.x) * 128) + ((int)threadIdx.x))] = acc[0];
}
"""

TL_TREE = """extern "C" __global__ void __launch_bounds__(256, 1) k(const float* __restrict__ X, float* __restrict__ Y) {
  float acc[8];
  float total[1];
  #pragma unroll
  for (int i = 0; i < 2; ++i) {
    *(float4*)(acc + (i * 4)) = *(float4*)(X + ((((int)blockIdx.x) * 2048) + (i * 1024)) + (((int)threadIdx.x) * 4)));
  }
  total[0] = 0x0p+0f;
  #pragma unroll
  for (int rv = 0; rv < 8; ++rv) {
    total[0] = (total[0] + acc[rv]);
  }
  total[0] = tl::AllReduce<tl::SumOp, 256, 1, 0, tl::NamedBarrier<256>>::run(total[0], (&(workspace[0])));
  Y[((int)blockIdx.x)] = total[0];
}
"""


def _tl_kernel(cuda: str, threads: int, **over) -> KernelArtifact:
    fields = dict(dsl="tilelang", target="cuda:90a", num_warps=threads // 32, constexprs={"threads": threads},
                  asm={"cuda": cuda, "ptx": VECTOR_PTX})
    fields.update(over)
    return _kernel(**fields)


def test_serial_reduction_tilelang_loop_into_acc0():
    findings = diagnose([_tl_kernel(TL_SERIAL, 128)], _memory_cost(intensity=0.25))
    finding = _only(findings, "serial_reduction")
    assert finding.evidence.startswith("`for (int j = 0; j < 512; ++j) {` updates acc[0] from itself")
    assert "T.reduce_sum" in finding.hint


def test_serial_reduction_tilelang_per_thread_partial_before_allreduce_is_fine():
    assert "serial_reduction" not in _codes(diagnose([_tl_kernel(TL_TREE, 256)], _memory_cost(intensity=0.25)))


CUDA_SERIAL = """
template <typename scalar_t>
__global__ void rowsum_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t cols) {
  const scalar_t* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float acc = 0.0f;
  for (int64_t j = 0; j < cols; ++j) acc += static_cast<float>(row[j]);
  out[blockIdx.x] = static_cast<scalar_t>(acc);
}
"""

CUDA_THREAD_STRIDED = """
__global__ void rowsum_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
  float acc = 0.0f;
  int i = 0;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) { acc += x[blockIdx.x * cols + j]; i += 2; }
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (threadIdx.x == 0) out[blockIdx.x] = acc + i;
}
"""

SHFL_PTX = VECTOR_PTX.replace("ret;", "shfl.sync.bfly.b32 %r1, %r2, 16, 31, -1;\n    ret;")


def _cuda_kernel(source: str, ptx: str = SCALAR_PTX, **over) -> KernelArtifact:
    fields = dict(name="rowsum_kernel", dsl="cuda", num_warps=1, constexprs={"threads": 32},
                  asm={"cuda": source, "ptx": ptx})
    fields.update(over)
    return _kernel(**fields)


def test_serial_reduction_cuda_scalar_loop_without_cross_thread_step():
    finding = _only(diagnose([_cuda_kernel(CUDA_SERIAL)], _memory_cost(intensity=0.25)), "serial_reduction")
    assert finding.evidence.startswith("`for (int64_t j = 0; j < cols; ++j) acc += static_cast<float>(row[j]);`")
    assert "__shfl_xor_sync" in finding.hint


def test_serial_reduction_cuda_does_not_fire():
    memory = _memory_cost(intensity=0.25)
    # the same loop is fine when the PTX shows a cross-thread step (shuffles, barriers, atomics)
    assert "serial_reduction" not in _codes(diagnose([_cuda_kernel(CUDA_SERIAL, ptx=SHFL_PTX)], memory))
    assert "serial_reduction" not in _codes(diagnose([_cuda_kernel(CUDA_THREAD_STRIDED, ptx=SHFL_PTX)], memory))
    # an integer counter is not an accumulator, even without shuffles
    counter = CUDA_SERIAL.replace("acc += static_cast<float>(row[j]);", "n += 1;").replace("float acc", "int n")
    assert "serial_reduction" not in _codes(diagnose([_cuda_kernel(counter)], memory))
    # another kernel's name: nothing to read
    assert "serial_reduction" not in _codes(diagnose([_cuda_kernel(CUDA_SERIAL, name="other")], memory))


# --- replicated_fragment ---------------------------------------------------------------------

TL_REPLICATED = """extern "C" __global__ void __launch_bounds__(128, 1) k(const float* __restrict__ X, float* __restrict__ Y) {
  float tot[1];
  float xs[512];
  tot[0] = 0x0p+0f;
  for (int s = 0; s < 4; ++s) {
    #pragma unroll
    for (int i = 0; i < 128; ++i) {
      *(float4*)(xs + (i * 4)) = *(float4*)(X + (((((int)blockIdx.x) * 2048) + (s * 512)) + (i * 4)));
    }
    for (int j = 0; j < 512; ++j) {
      tot[0] = (tot[0] + xs[j]);
    }
  }
  Y[((int)blockIdx.x)] = tot[0];
}
"""


def test_replicated_fragment_filled_alike_by_every_thread():
    finding = _only(diagnose([_tl_kernel(TL_REPLICATED, 128)], _memory_cost()), "replicated_fragment")
    assert finding.evidence.startswith("`float xs[512];` per thread, filled from global memory without threadIdx")
    assert "all 128 threads load and hold the same 512 elements" in finding.evidence


def test_replicated_fragment_reduced_whole_without_allreduce():
    # filled from shared memory (not global), then reduced whole by each thread with no cross-thread step
    source = TL_REPLICATED.replace("*(float4*)(X + (((((int)blockIdx.x) * 2048) + (s * 512)) + (i * 4)))",
                                   "*(float4*)(((float*)buf) + (i * 4))")
    finding = _only(diagnose([_tl_kernel(source, 128)], _memory_cost()), "replicated_fragment")
    assert "reduced whole by `for (int j = 0; j < 512; ++j) {`" in finding.evidence


@pytest.mark.parametrize("source,threads", [
    (TL_TREE, 256),                                                    # 8 elements each, indexed by threadIdx
    (TL_REPLICATED.replace("(s * 512)) + (i * 4)", "(s * 512)) + (((int)threadIdx.x) * 4)").replace(
        "  Y[", "  tot[0] = tl::AllReduce<tl::SumOp, 128, 1, 0>::run(tot[0], ws);\n  Y["), 128),  # own slice, a tree
    (TL_REPLICATED.replace("xs[512]", "xs[32]"), 128),                 # a few broadcast values are no tile
    (TL_REPLICATED, 32),                                               # one warp: nothing to replicate across
])
def test_replicated_fragment_does_not_fire(source, threads):
    assert "replicated_fragment" not in _codes(diagnose([_tl_kernel(source, threads)], _memory_cost()))


def test_replicated_fragment_is_tilelang_only():
    assert "replicated_fragment" not in _codes(diagnose([_tl_kernel(TL_REPLICATED, 128, dsl="cuda")], _memory_cost()))


# --- uncoalesced_access ----------------------------------------------------------------------

TTGIR_LANE_STRIDED = """#blocked = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @k(%x_ptr: !tt.ptr<f32>, %N: i32) {
    %rows = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32, #blocked> loc(#loc11)
    %base = tt.splat %pid : i32 -> tensor<128xi32, #blocked> loc(#loc11)
    %r = arith.addi %base, %rows : tensor<128xi32, #blocked> loc(#loc11)
    %n = tt.splat %N : i32 -> tensor<128xi32, #blocked> loc(#loc11)
    %off = arith.muli %r, %n : tensor<128xi32, #blocked> loc(#loc11)
    %px = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>, #blocked> loc(#loc11)
    %p = tt.addptr %px, %off : tensor<128x!tt.ptr<f32>, #blocked>, tensor<128xi32, #blocked> loc(#loc11)
    %v = tt.load %p : tensor<128x!tt.ptr<f32>, #blocked> loc(#loc11)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
""" + TTGIR_LOCS

TTGIR_ROW_OFFSETS_2D = """#blocked = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @k(%a_ptr: !tt.ptr<f16>, %stride_am: i32) {
    %rm = tt.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32, #ttg.slice<{dim = 1, parent = #blocked}>> loc(#loc11)
    %rk = tt.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32, #ttg.slice<{dim = 0, parent = #blocked}>> loc(#loc11)
    %rm2 = tt.expand_dims %rm {axis = 1 : i32} : tensor<64xi32, #ttg.slice<{dim = 1, parent = #blocked}>> -> tensor<64x1xi32, #blocked> loc(#loc11)
    %s = tt.splat %stride_am : i32 -> tensor<64x1xi32, #blocked> loc(#loc11)
    %rows = arith.muli %rm2, %s : tensor<64x1xi32, #blocked> loc(#loc11)
    %rk2 = tt.expand_dims %rk {axis = 0 : i32} : tensor<32xi32, #ttg.slice<{dim = 0, parent = #blocked}>> -> tensor<1x32xi32, #blocked> loc(#loc11)
    %rowsb = tt.broadcast %rows : tensor<64x1xi32, #blocked> -> tensor<64x32xi32, #blocked> loc(#loc11)
    %rkb = tt.broadcast %rk2 : tensor<1x32xi32, #blocked> -> tensor<64x32xi32, #blocked> loc(#loc11)
    %off = arith.addi %rowsb, %rkb : tensor<64x32xi32, #blocked> loc(#loc11)
    %pa = tt.splat %a_ptr : !tt.ptr<f16> -> tensor<64x32x!tt.ptr<f16>, #blocked> loc(#loc11)
    %p = tt.addptr %pa, %off : tensor<64x32x!tt.ptr<f16>, #blocked>, tensor<64x32xi32, #blocked> loc(#loc11)
    %v = tt.load %p : tensor<64x32x!tt.ptr<f16>, #blocked> loc(#loc11)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
""" + TTGIR_LOCS


def test_uncoalesced_access_triton_arange_times_runtime_stride():
    findings = diagnose([_ttgir_kernel(TTGIR_LANE_STRIDED)], _memory_cost())
    assert _codes(findings) == ["uncoalesced_access"]
    assert findings[0].evidence.startswith("line 18: tt.load of f32 whose offsets along the contiguous dimension "
                                           "are tl.arange x the runtime value N")


def test_uncoalesced_access_triton_large_constant_stride():
    constant = TTGIR_LANE_STRIDED.replace("%n = tt.splat %N : i32 -> tensor<128xi32, #blocked>",
                                          "%n = arith.constant dense<4096> : tensor<128xi32, #blocked>")
    assert "tl.arange x 4096" in _only(diagnose([_ttgir_kernel(constant)], _memory_cost()),
                                       "uncoalesced_access").evidence


@pytest.mark.parametrize("ttgir", [
    TTGIR_ROW_OFFSETS_2D,                                                       # row stride on the slow dim
    TTGIR_LANE_STRIDED.replace("%n = tt.splat %N : i32 -> tensor<128xi32, #blocked>",
                               "%n = arith.constant dense<2> : tensor<128xi32, #blocked>"),  # interleaved pairs
    TTGIR_LANE_STRIDED.replace("%off = arith.muli %r, %n", "%off = arith.addi %r, %n"),    # contiguous
])
def test_uncoalesced_access_triton_does_not_fire(ttgir):
    assert "uncoalesced_access" not in _codes(diagnose([_ttgir_kernel(ttgir)], _memory_cost()))


def test_uncoalesced_access_triton_sees_the_strided_dim_through_the_layout_order():
    # the same 2-D offsets with the layout's fastest dim on rows: the row stride is now lane to lane
    column_major = TTGIR_ROW_OFFSETS_2D.replace("order = [1, 0]", "order = [0, 1]")
    assert "uncoalesced_access" in _codes(diagnose([_ttgir_kernel(column_major)], _memory_cost()))


def test_uncoalesced_access_tilelang_thread_times_row_length():
    finding = _only(diagnose([_tl_kernel(TL_SERIAL, 128)], _memory_cost()), "uncoalesced_access")
    assert "adjacent threads read X 2048 bytes apart" in finding.evidence
    assert "T.copy or T.Parallel" in finding.hint
    # 4 floats per thread with float4 loads are contiguous
    assert "uncoalesced_access" not in _codes(diagnose([_tl_kernel(TL_TREE, 256)], _memory_cost()))


def test_uncoalesced_access_cuda_thread_index_times_row_length():
    source = """
__global__ void rowsum_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int j = 0; j < cols; ++j) acc += x[r * cols + j];
  out[r] = acc;
}
"""
    finding = _only(diagnose([_cuda_kernel(source)], _memory_cost()), "uncoalesced_access")
    assert "consecutive threads index x cols elements apart" in finding.evidence
    # a derived index (tid / 2) and a small literal stride (tid * 4: float4 packs) are not flagged
    fine = source.replace("x[r * cols + j]", "x[(r / 2) * cols + j] + x[r * 4 + j]")
    assert "uncoalesced_access" not in _codes(diagnose([_cuda_kernel(fine)], _memory_cost()))


# --- idle_threads ----------------------------------------------------------------------------


def test_idle_threads_triton_block_smaller_than_threads():
    findings = diagnose([_ttgir_kernel(TTGIR_VECTOR_ACCUMULATOR, num_warps=8)], _memory_cost())
    assert _codes(findings) == ["idle_threads"]
    assert findings[0].evidence.startswith("the largest tensor has 64 element(s) on 8 warps (256 threads)")


@pytest.mark.parametrize("over", [
    {"num_warps": 2},                                        # 64 elements on 64 threads
    {"num_warps": 8, "grid": [64]},                          # grid below the SM count: too_few_blocks' business
    {"num_warps": 1, "constexprs": {"BLOCK_SIZE": 16}},      # a one-warp tiny block is tiny_block
])
def test_idle_threads_triton_does_not_fire(over):
    assert "idle_threads" not in _codes(diagnose([_ttgir_kernel(TTGIR_VECTOR_ACCUMULATOR, **over)], _memory_cost()))


TL_GUARDED = """extern "C" __global__ void __launch_bounds__(256, 1) k(const float* __restrict__ X, float* __restrict__ Y) {
  if (((int)threadIdx.x) < 32) {
    Y[((((int)blockIdx.x) * 32) + ((int)threadIdx.x))] = (X[((((int)blockIdx.x) * 32) + ((int)threadIdx.x))] * 2.0f);
  }
}
"""


def test_idle_threads_tilelang_guard():
    finding = _only(diagnose([_tl_kernel(TL_GUARDED, 256)], _memory_cost()), "idle_threads")
    assert finding.evidence.startswith("`if (((int)threadIdx.x) < 32) {` guards the work under 256 threads")
    assert "224 threads idle" in finding.evidence


def test_idle_threads_tilelang_warp_specialized_branch_is_not_idle():
    producer = TL_GUARDED.replace("  }\n}", "  } else {\n    Y[0] = 0.0f;\n  }\n}").replace("< 32", "< 128")
    assert "idle_threads" not in _codes(diagnose([_tl_kernel(producer, 256)], _memory_cost()))
    assert "idle_threads" not in _codes(diagnose([_tl_kernel(TL_GUARDED.replace("< 32", "< 192"), 256)],
                                                 _memory_cost()))


# --- no_pipelining and small_tiles -----------------------------------------------------------

TTGIR_DOT_LOOP = """#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [8, 1], instrShape = [16, 128, 16]}>
module attributes {"ttg.num-warps" = 8 : i32} {
  tt.func public @k(%a_ptr: !tt.ptr<f16>, %K: i32) {
    %acc = scf.for %k = %c0 to %K step %c32 iter_args(%c = %zero) -> (tensor<128x128xf32, #mma>)  : i32 {
      %d = ttng.warp_group_dot %a, %b, %c {inputPrecision = 0 : i32, isAsync = true} : !ttg.memdesc<128x32xf16, #shared, #smem> * !ttg.memdesc<32x128xf16, #shared1, #smem> -> tensor<128x128xf32, #mma> loc(#loc11)
      scf.yield %d : tensor<128x128xf32, #mma> loc(#loc11)
    } loc(#loc13)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
""" + TTGIR_LOCS

TTGIR_SMALL_DOT = TTGIR_DOT_LOOP.replace(
    "%d = ttng.warp_group_dot %a, %b, %c {inputPrecision = 0 : i32, isAsync = true} : "
    "!ttg.memdesc<128x32xf16, #shared, #smem> * !ttg.memdesc<32x128xf16, #shared1, #smem> -> "
    "tensor<128x128xf32, #mma>",
    "%d = tt.dot %a, %b, %c, inputPrecision = tf32 : tensor<32x32xf16, #dot0> * tensor<32x32xf16, #dot1> -> "
    "tensor<32x32xf32, #mma>").replace("tensor<128x128xf32, #mma>", "tensor<32x32xf32, #mma>")

ASYNC_PTX = MMA_PTX + "\n    cp.async.cg.shared.global [%r1], [%rd1], 16, 16;\n    cp.async.commit_group;\n"


def _gemm_kernel(ttgir: str, ptx: str = MMA_PTX, **over) -> KernelArtifact:
    fields = dict(num_warps=8, num_stages=3, shared_bytes=49152, grid=[1024], constexprs={"BLOCK_M": 128},
                  asm={"ttgir": ttgir, "ptx": ptx})
    fields.update(over)
    return _kernel(**fields)


def test_no_pipelining_triton_one_stage():
    findings = diagnose([_gemm_kernel(TTGIR_DOT_LOOP, num_stages=1)], _gemm_cost(MathMode.fp16))
    assert _codes(findings) == ["no_pipelining"]
    assert findings[0].evidence == ("line 17: tl.dot K loop with num_stages=1, no cp.async or TMA copy in the PTX: "
                                    "each K slice waits for its own loads")
    assert "num_stages=3-4" in findings[0].hint


def test_no_pipelining_triton_stages_without_async_copies():
    finding = _only(diagnose([_gemm_kernel(TTGIR_DOT_LOOP)], _gemm_cost(MathMode.fp16)), "no_pipelining")
    assert "num_stages=3, no cp.async" in finding.evidence


def test_no_pipelining_triton_does_not_fire():
    assert diagnose([_gemm_kernel(TTGIR_DOT_LOOP, ptx=ASYNC_PTX)], _gemm_cost(MathMode.fp16)) == []
    # a dot outside any loop has no K slices to overlap
    no_loop = TTGIR_DOT_LOOP.replace("scf.for %k = %c0 to %K step %c32", "scf.if %flag")
    assert diagnose([_gemm_kernel(no_loop, num_stages=1)], _gemm_cost(MathMode.fp16)) == []


TL_GEMM_SYNC = """extern "C" __global__ void __launch_bounds__(128, 1) k(const half_t* __restrict__ A, const half_t* __restrict__ B, half_t* __restrict__ C) {
  float acc[128];
  for (int ko = 0; ko < 16; ++ko) {
    __syncthreads();
    *(uint4*)(((half_t*)As) + (((int)threadIdx.x) * 8)) = *(uint4*)(A + ((ko * 32) + (((int)threadIdx.x) & 3) * 8));
    __syncthreads();
    tl::wgmma_ss<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 128, 16, false, true, 1, 1>(desc_a, desc_b, ((uint32_t*)(acc + 0)), 1);
  }
}
"""


def test_no_pipelining_tilelang_synchronous_copies():
    k = _tl_kernel(TL_GEMM_SYNC, 128, shared_bytes=16384, asm={"cuda": TL_GEMM_SYNC, "ptx": WGMMA_PTX})
    finding = _only(diagnose([k], _gemm_cost(MathMode.fp16)), "no_pipelining")
    assert finding.evidence.startswith("`for (int ko = 0; ko < 16; ++ko) {` copies each K slice")
    assert "T.Pipelined" in finding.hint
    tma = TL_GEMM_SYNC.replace("__syncthreads();\n    *(uint4*)",
                               "tl::tma_load(A_desc, mbar, As, 0, 0);\n    *(uint4*)")
    assert diagnose([k.model_copy(update={"asm": {"cuda": tma, "ptx": WGMMA_PTX}})], _gemm_cost(MathMode.fp16)) == []


CUDA_MMA_LOOP_PTX = """
.visible .entry k(.param .u64 k_param_0)
{
$L__BB0_2:
    ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];
    st.shared.v4.u32 [%r5], {%r1, %r2, %r3, %r4};
    bar.sync 0;
    wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%r6, %r7}, [%r8];
    wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 {%f1, %f2}, {%r6}, {%r7}, {%f1, %f2};
    bar.sync 0;
    @%p1 bra $L__BB0_2;
    ret;
}
"""


def test_no_pipelining_cuda_two_barriers_per_k_step():
    k = _cuda_kernel("", ptx=CUDA_MMA_LOOP_PTX, shared_bytes=4096, grid=[64, 64], num_warps=4,
                     constexprs={"threads": 128})
    finding = _only(diagnose([k], _gemm_cost(MathMode.fp16)), "no_pipelining")
    assert finding.evidence.startswith("the mma K loop has 2 bar.sync per iteration and no cp.async")
    one_barrier = CUDA_MMA_LOOP_PTX.replace("    bar.sync 0;\n    @%p1", "    @%p1")  # register-staged double buffer
    assert diagnose([k.model_copy(update={"asm": {"ptx": one_barrier}})], _gemm_cost(MathMode.fp16)) == []
    simt = CUDA_MMA_LOOP_PTX.replace("wmma.mma.sync.aligned", "fma.rn.f32")  # no tensor cores: not this rule
    assert diagnose([k.model_copy(update={"asm": {"ptx": simt}})], _gemm_cost(MathMode.fp32)) == []


def test_small_tiles_triton():
    k = _gemm_kernel(TTGIR_SMALL_DOT, ptx=ASYNC_PTX, num_warps=4, grid=[16384])
    findings = diagnose([k], _gemm_cost(MathMode.fp16))
    assert _codes(findings) == ["small_tiles"]
    assert findings[0].evidence == ("line 18: tl.dot on 32x32 tiles over 16384 programs: A and B are re-read once per "
                                    "tile, up to 4x as often as with 128x128 tiles, which would still give 1024 "
                                    "programs for 132 SMs")
    assert "@triton.autotune" in findings[0].hint


def test_small_tiles_does_not_fire():
    # 128x128 tiles
    assert diagnose([_gemm_kernel(TTGIR_DOT_LOOP, ptx=ASYNC_PTX)], _gemm_cost(MathMode.fp16)) == []
    # small tiles on a problem too small for 128x128 tiles to fill the SMs (256 x 32x32 = 16 tiles of 128x128)
    small = _gemm_kernel(TTGIR_SMALL_DOT, ptx=ASYNC_PTX, num_warps=4, grid=[256])
    assert diagnose([small], _gemm_cost(MathMode.fp16, n=512)) == []


# --- dtype_round_trip ------------------------------------------------------------------------

TTGIR_ROUND_TRIP = """#blocked = #ttg.blocked<{sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @k(%x_ptr: !tt.ptr<bf16>) {
    %sq = arith.mulf %x, %x : tensor<1024xf32, #blocked> loc(#loc11)
    %sq_15 = arith.truncf %sq : tensor<1024xf32, #blocked> to tensor<1024xbf16, #blocked> loc(#loc11)
    %sq_16 = arith.extf %sq_15 : tensor<1024xbf16, #blocked> to tensor<1024xf32, #blocked> loc(#loc11)
    %one = arith.truncf %s : f32 to bf16 loc(#loc1)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
""" + TTGIR_LOCS

PTX_ROUND_TRIP = VECTOR_PTX.replace("add.f32 %f5, %f1, %f2;", """cvt.rn.f16x2.f32 %r10, %f2, %f1;
    mov.b32 {%rs1, %rs2}, %r10;
    cvt.f32.f16 %f6, %rs1;
    cvt.f32.f16 %f7, %rs2;
    { cvt.rn.bf16.f32 %rs3, %f3;}
    mov.b16 %rs4, %rs3;
    { cvt.f32.bf16 %f8, %rs4;}""")


def test_dtype_round_trip_triton_truncf_then_extf():
    findings = diagnose([_ttgir_kernel(TTGIR_ROUND_TRIP)], _memory_cost())
    assert _codes(findings) == ["dtype_round_trip"]
    assert findings[0].evidence.startswith("line 18: f32 -> bf16 -> f32: `%sq_15 = arith.truncf %sq")
    assert ".to(fp16/bf16).to(fp32)" in findings[0].hint


def test_dtype_round_trip_ptx_through_packs_and_copies():
    findings = diagnose([_kernel(dsl="cuda", asm={"ptx": PTX_ROUND_TRIP})], _memory_cost())
    assert _codes(findings) == ["dtype_round_trip"]
    assert findings[0].evidence.startswith("3 value(s) converted f32 -> f16 -> f32 in the PTX: "
                                           "`cvt.rn.f16x2.f32 %r10, %f2, %f1;` then `cvt.f32.f16 %f6, %rs1;`")
    assert "static_cast<float>" in findings[0].hint


@pytest.mark.parametrize("ptx", [
    # a bf16 problem: widen on load, narrow once on store
    VECTOR_PTX.replace("add.f32 %f5, %f1, %f2;", "cvt.f32.bf16 %f5, %rs1;\n    cvt.rn.bf16.f32 %rs2, %f5;"),
    # narrowed, then another value widened
    VECTOR_PTX.replace("add.f32 %f5, %f1, %f2;", "cvt.rn.f16.f32 %rs1, %f1;\n    cvt.f32.f16 %f5, %rs9;"),
    # fp32 -> fp16, then fp16 read as bf16 is no round trip
    VECTOR_PTX.replace("add.f32 %f5, %f1, %f2;", "cvt.rn.f16.f32 %rs1, %f1;\n    cvt.f32.bf16 %f5, %rs1;"),
])
def test_dtype_round_trip_does_not_fire(ptx):
    assert diagnose([_kernel(dsl="tilelang", asm={"ptx": ptx})], _memory_cost()) == []
    no_trip = TTGIR_ROUND_TRIP.replace("arith.extf %sq_15", "arith.extf %sq")
    assert diagnose([_ttgir_kernel(no_trip)], _memory_cost()) == []


DSL_WORDED_CODES = {"scalar_global_loads", "no_tensor_cores", "no_shared_memory_tiling", "tiny_block",
                    "serial_reduction", "replicated_fragment", "uncoalesced_access", "idle_threads", "no_pipelining",
                    "warp_level_mma", "small_tiles", "dtype_round_trip"}


@pytest.mark.parametrize("dsl", ["triton", "tilelang", "cuda"])
def test_every_builtin_dsl_words_every_kernel_specific_hint(dsl):
    from kernelgate.diagnosis.hints import GENERIC_HINTS
    from kernelgate.dsl import get_plugin

    hints = get_plugin(dsl).hints
    assert set(hints) == DSL_WORDED_CODES
    assert all(hints[code] != GENERIC_HINTS[code] for code in hints)
