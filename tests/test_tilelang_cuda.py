"""TileLang and CUDA plug-ins on the CPU: real lowering for sm_90a, real nvcc compiles, the cache.

Without a GPU neither DSL can run, so a screen lowers or compiles the candidate, runs its forward
dry (launches recorded, not executed) and reports the static artifacts; nothing is timed and
numerics are not claimed. Every test goes through a real worker process.
"""

from __future__ import annotations

import pytest

from kernelgate import Candidate, Problem, ScreenOptions, Status, screen
from kernelgate.dsl import _nvcc, detect_dsl
from kernelgate.models import Reason

from .conftest import EXAMPLES, HAS_GPU, fixture_source

pytestmark = pytest.mark.skipif(HAS_GPU, reason="CPU-path tests; the GPU path is tested by test_gpu.py")

ROWSUM = str(EXAMPLES / "problems" / "rowsum.py")
SMALL = {"ROWS": 64, "COLS": 256}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One compile cache for the module: the CUDA extension (torch headers) compiles once."""
    return str(tmp_path_factory.mktemp("compile-cache"))


def _screen(fixture: str, cache: str, dtype: str | None = None, shape=SMALL):
    problem = Problem(kind="kernelbench_file", name=ROWSUM, shape=shape, dtype=dtype)
    return screen(Candidate(source=fixture_source(fixture), name=fixture), problem,
                  options=ScreenOptions(compile_cache_dir=cache))


def _kernels(verdict):
    # the verdict drops IR text; the worker's measurement keeps it, so look at the kernel records
    return {k.name: k for k in verdict.kernels}


def test_detection_prefers_the_dsl_that_builds_the_kernels():
    assert detect_dsl(fixture_source("tilelang_rowsum.py")) == "tilelang"
    assert detect_dsl(fixture_source("cuda_rowsum.py")) == "cuda"
    assert detect_dsl(fixture_source("rowsum_good.py")) == "triton"
    assert detect_dsl("import tilelang\nimport triton\n") == "tilelang"


def test_tilelang_is_lowered_for_sm90a_and_checked_statically(shared_cache):
    verdict = _screen("tilelang_rowsum.py", shared_cache)
    assert verdict.status is Status.untimed, verdict.summary
    assert verdict.dsl == "tilelang"
    assert verdict.numerics.checked is False and verdict.numerics.executor == "none"
    assert "tilelang kernels cannot run without a GPU" in verdict.numerics.skipped_reason
    kernel = _kernels(verdict)["rowsum"]
    assert kernel.target == "cuda:90a" and kernel.dsl == "tilelang"
    assert kernel.launches == 1
    assert kernel.grid == [64 // 4, 1, 1]          # T.ceildiv(M, block_M) blocks
    assert kernel.num_warps == 128 // 32           # threads=128
    assert kernel.registers and kernel.registers > 0 and kernel.spill_bytes == 0
    assert verdict.environment.dsl_versions["tilelang"] == "0.1.15"


def test_tilelang_jit_decorator_and_bf16_problem(shared_cache):
    verdict = _screen("tilelang_jit_rowsum.py", shared_cache, dtype="bfloat16")
    assert verdict.status is Status.untimed, verdict.summary
    kernel = _kernels(verdict)["rowsum_jit"]
    assert kernel.grid == [64 // 8, 1, 1] and kernel.num_warps == 8
    assert kernel.registers and kernel.registers > 0


def test_tilelang_generated_cuda_ptx_and_sass(shared_cache):
    """The plug-in's artifacts themselves, before the gate drops the IR text from the verdict."""
    import importlib
    import sys

    from kernelgate import compile_cache
    from kernelgate.dsl import tilelang as plugin_module

    import tilelang  # noqa: F401

    tl_jit = sys.modules["tilelang.jit"]
    original = tl_jit.cached
    compile_cache.activate(shared_cache)
    plugin = plugin_module.TileLangPlugin()
    log = plugin.prepare(interpret=True)
    sys.path.insert(0, str(EXAMPLES.parent / "tests" / "fixtures"))
    try:
        module = importlib.import_module("tilelang_rowsum")
        import torch

        log.dry_run = True
        out = module.ModelNew()(torch.rand(64, 256))
        assert out.shape == (64,) and torch.isnan(out).all()  # a stand-in: nothing ran
        kernels, notes = plugin.artifacts(log, EXAMPLES, interpret=True)
    finally:
        sys.path.pop(0)
        sys.modules.pop("tilelang_rowsum", None)
        tl_jit.cached = original  # the hook must not outlive the test in this process
        compile_cache.activate(None)
    assert not notes, notes
    (kernel,) = kernels
    assert "__global__" in kernel.asm["cuda"] and "rowsum_kernel" in kernel.asm["cuda"]
    assert ".entry rowsum_kernel" in kernel.asm["ptx"] and ".target sm_90a" in kernel.asm["ptx"]
    assert "Function : rowsum_kernel" in kernel.asm["sass"]
    assert "ld.global.v4" in kernel.asm["ptx"] or "ld.global.nc.v4" in kernel.asm["ptx"]


def test_tilelang_frontend_error_is_a_compile_error_with_the_candidate_line(shared_cache):
    verdict = _screen("tilelang_compile_error.py", shared_cache)
    assert verdict.status is Status.reject and verdict.reason is Reason.compile_error
    assert "line 13: T.reduce_sum(A_f, B[bx], dim=3)" in verdict.failure.message
    assert "Invalid reduce output shape" in verdict.failure.message


def test_cuda_extension_compiled_for_sm90_statically_then_from_cache(shared_cache):
    first = _screen("cuda_rowsum.py", shared_cache)
    assert first.status in (Status.untimed, Status.repair), first.summary
    assert first.dsl == "cuda" and first.numerics.checked is False
    assert "cuda kernels cannot run without a GPU" in first.numerics.skipped_reason
    kernel = _kernels(first)["rowsum_kernel"]
    assert kernel.target == "cuda:90" and kernel.launches == 1
    assert kernel.registers and kernel.registers > 0 and kernel.shared_bytes == 256 * 4
    # AT_DISPATCH instantiates a double kernel too; an fp32 problem is not diagnosed on its code
    assert "fp64_arithmetic" not in [f.code for f in first.findings]

    again = _screen("cuda_rowsum.py", shared_cache)
    kernel_again = _kernels(again)["rowsum_kernel"]
    assert kernel_again.from_cache and not kernel.from_cache
    assert again.seconds["compile"] < first.seconds["compile"] / 5
    assert kernel_again.registers == kernel.registers


def test_cuda_picks_the_instantiation_of_the_problem_dtype(shared_cache):
    from kernelgate.dsl.cuda import STATIC_ARCH, _static_options

    source = fixture_source("cuda_rowsum.py")
    cuda = source.split('cuda_src = r"""', 1)[1].split('"""', 1)[0]
    code = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + cuda
    from kernelgate import compile_cache

    compile_cache.activate(shared_cache)  # the same key as the screens above: no second compile
    try:
        result = _nvcc.compile_static(code, arch=STATIC_ARCH, label="cuda", options=_static_options("rowsum_ext", ["-O3"], []))
    finally:
        compile_cache.activate(None)
    assert result.ok, result.errors
    assert len(_nvcc.split_ptx(result.ptx)) == 4      # float, double, half, bfloat16
    asm, res = _nvcc.kernel_view(result, "rowsum_kernel", "bfloat16")
    assert asm["ptx"].count(".entry") == 1 and "BFloat16" in asm["ptx"].split("(", 1)[0]
    asm64, _ = _nvcc.kernel_view(result, "rowsum_kernel", "float64")
    assert ".f64" in asm64["ptx"] and ".f64" not in _nvcc.kernel_view(result, "rowsum_kernel", "float32")[0]["ptx"]
    assert res.registers and res.registers > 0


def test_cuda_compile_error_names_the_candidate_line(shared_cache):
    verdict = _screen("cuda_compile_error.py", shared_cache)
    assert verdict.status is Status.reject and verdict.reason is Reason.compile_error
    source_lines = fixture_source("cuda_compile_error.py").splitlines()
    broken = next(i for i, line in enumerate(source_lines, 1) if "BROKEN" in line)
    assert f"line {broken}: error" in verdict.failure.message
    assert "site-packages" not in verdict.failure.message and "#include" not in verdict.failure.message


def test_ptxas_report_parsing():
    text = """ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90'
ptxas info    : Function properties for _Z6kernelPf
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 360 bytes cmem[0]
"""
    (res,) = _nvcc.parse_ptxas(text).values()
    assert (res.registers, res.spill_bytes, res.shared_bytes, res.stack_bytes) == (40, 8, 2048, 8)
    assert _nvcc.pick_entries(["_Z6kernelPf", "_Z5otherPf"], "kernel", "float32") == ["_Z6kernelPf"]


def test_cuda_threads_per_block_from_the_launch_sites():
    from kernelgate.dsl.cuda import _threads_per_block

    source = """
constexpr int kThreads = 256;
#define TILE 16
__global__ void a(float* x) {}
__global__ void b(float* x) {}
__global__ void c(float* x) {}
__global__ void d(float* x) {}
void go(int rows, int n) {
    a<float, true><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x);
    dim3 block(TILE, TILE);
    b<<<grid, block>>>(x);
    c<<<rows, 1>>>(x);
    d<<<rows, n>>>(x);
}
"""
    assert [_threads_per_block(source, k) for k in "abcd"] == [256, 256, 1, None]


def test_one_thread_blocks_are_a_tiny_block_finding():
    from kernelgate.diagnosis import diagnose
    from kernelgate.hardware import MathMode
    from kernelgate.models import Cost, KernelArtifact

    kernel = KernelArtifact(name="k", dsl="cuda", target="cuda:90", launches=1, num_warps=1,
                            constexprs={"threads": 1}, grid=None)
    cost = Cost(flops=1e6, bytes_compulsory=1e8, math_mode=MathMode.fp32, peak_mode=MathMode.fp32, estimate="t")
    (finding,) = diagnose([kernel], cost)
    assert finding.code == "tiny_block" and "1 thread(s) per block" in finding.evidence
    assert "128-256 threads" in finding.hint


def test_layout_kernel_beside_a_wgmma_convolution_is_no_finding(shared_cache):
    # conv2d_nhwc_transpose launches a layout pass (no MMA) and the WGMMA convolution: the layout
    # pass is not a GEMM without tensor cores
    problem = Problem.op("conv2d", dtype="float16", batch=1, in_channels=8, out_channels=16, height=12, width=20)
    verdict = screen(Candidate(source=(EXAMPLES / "tilelang" / "conv2d_nhwc_transpose.py").read_text()), problem,
                     options=ScreenOptions(compile_cache_dir=shared_cache))
    assert verdict.status is Status.untimed, verdict.summary
    assert set(_kernels(verdict)) == {"to_nhwc", "conv2d_im2col"}
    assert not verdict.findings
