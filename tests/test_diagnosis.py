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
