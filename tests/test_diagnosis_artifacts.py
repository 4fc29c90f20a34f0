"""kernelgate.diagnosis on real compiled artifacts: small defective fixtures, and the shipped good examples.

Each fixture under ``tests/fixtures/diag/`` is a tiny kernel with a deliberate defect (its
docstring says which, and which rule catches it). The tests compile them with the plug-ins' own
machinery, as a CPU screen does: Triton ahead of time for sm_90 (TTGIR, PTX, SASS, ptxas), TileLang
lowered for sm_90a and its generated CUDA compiled with nvcc, CUDA device code compiled with nvcc
for sm_90. Compiling directly (not through ``screen``) keeps these tests to a second or a few each;
the launch a screen would record is written down here instead (arguments, grid, warps).

The good examples go through the whole screen at their CPU shapes (``examples/screen_examples.py``)
and must not gain a finding: a rule that fires on well-written kernels is a false positive.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from pathlib import Path

import pytest

from kernelgate.diagnosis import diagnose
from kernelgate.hardware import MathMode
from kernelgate.models import Cost, KernelArtifact

from .conftest import EXAMPLES, FIXTURES, HAS_GPU

DIAG = FIXTURES / "diag"
MiB = 1 << 20


def _memory_cost(nbytes: float = 64 * MiB) -> Cost:
    """A row reduction's cost: a quarter flop per byte."""
    return Cost(flops=nbytes / 4, bytes_compulsory=nbytes, math_mode=MathMode.fp32, peak_mode=MathMode.fp32,
                estimate="catalogue:test")


def _gemm_cost(n: int = 4096) -> Cost:
    return Cost(flops=2.0 * n**3, bytes_compulsory=3.0 * n * n * 2, math_mode=MathMode.fp16,
                peak_mode=MathMode.fp16, estimate="catalogue:matmul")


def _codes(findings) -> list[str]:
    return [f.code for f in findings]


def _only(findings, code: str):
    (found,) = [f for f in findings if f.code == code]
    return found


def _line_of(fixture: str, text: str) -> int:
    """The 1-based line of the fixture where ``text`` first appears."""
    lines = (DIAG / fixture).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


# --- compiling fixtures the way the plug-ins do ----------------------------------------------


def _triton(fixture: str, kernel: str, args: list, grid: list[int], **meta) -> KernelArtifact:
    """Compile one Triton kernel of a fixture ahead of time for sm_90, as a CPU screen does after its launch."""
    from kernelgate.dsl import Launch
    from kernelgate.dsl import triton as plugin

    module = plugin._import_uninterpreted(DIAG / fixture)
    jit_fn = plugin._find_jit_function(module, kernel)
    launch = Launch(jit_fn, tuple(args), dict(meta), grid)
    compiled = plugin._compile_ahead(jit_fn, launch)
    return plugin._describe(kernel, compiled, "cuda:90", 1, launch, gpu=False)


def _tensor(dtype: str = "float32"):
    """A tensor argument as the ahead-of-time compile sees it: dtype and a 16-byte aligned address."""
    from kernelgate.dsl.triton import _TensorStub

    return _TensorStub(dtype, 1 << 20)


@pytest.fixture(scope="module")
def compile_cache_dir(tmp_path_factory):
    """One nvcc cache for the module (TileLang and CUDA compiles of these tests)."""
    return tmp_path_factory.mktemp("diag-compile-cache")


def _tilelang(fixture: str, inputs: list, cache_dir, folder: Path = DIAG,
              problem_dtype: str = "float32") -> KernelArtifact:
    """Lower a TileLang fixture (or an example, with its ``folder``) for sm_90a through the plug-in's
    hook and run its forward dry."""
    from kernelgate import compile_cache
    from kernelgate.dsl import tilelang as plugin_module

    import tilelang  # noqa: F401  (imports tilelang.jit)

    tl_jit = sys.modules["tilelang.jit"]
    original = tl_jit.cached
    compile_cache.activate(str(cache_dir))
    plugin = plugin_module.TileLangPlugin()
    log = plugin.prepare(interpret=True)
    log.dry_run, log.problem_dtype = True, problem_dtype
    name = fixture.removesuffix(".py")
    sys.path.insert(0, str(folder))
    try:
        importlib.import_module(name).ModelNew()(*inputs)
        kernels, notes = plugin.artifacts(log, folder, interpret=True)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)
        tl_jit.cached = original  # the hook must not outlive the test in this process
        compile_cache.activate(None)
    assert not notes, notes
    (kernel,) = kernels
    assert "ptx" in kernel.asm and "cuda" in kernel.asm
    return kernel


def _cuda(fixture: str, kernel: str, grid: list[int], threads: int, cache_dir) -> KernelArtifact:
    """Compile a CUDA fixture's device code (its ``KERNEL`` string) with nvcc for sm_90, as the plug-in does."""
    from kernelgate import compile_cache
    from kernelgate.dsl import _nvcc
    from kernelgate.dsl.cuda import STATIC_ARCH

    tree = ast.parse((DIAG / fixture).read_text())
    source = next(node.value.value for node in tree.body
                  if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "KERNEL")
    compile_cache.activate(str(cache_dir))
    try:
        result = _nvcc.compile_static(source, options=["-O3", "-w"], arch=STATIC_ARCH, label="cuda")
    finally:
        compile_cache.activate(None)
    assert result.ok, result.errors
    view, res = _nvcc.kernel_view(result, kernel, "float32")
    return KernelArtifact(name=kernel, dsl="cuda", target="cuda:90", launches=1, num_warps=threads // 32,
                          shared_bytes=res.shared_bytes, registers=res.registers, spill_bytes=res.spill_bytes,
                          grid=grid, constexprs={"threads": threads}, asm={"cuda": source, **view})


needs_compilers = pytest.mark.skipif(HAS_GPU, reason="CPU-path compiles; on a GPU the plug-ins use the device")


# --- Triton ----------------------------------------------------------------------------------


@needs_compilers
def test_triton_chain_of_chunk_reductions_is_a_serial_reduction():
    k = _triton("triton_chunk_serial.py", "chunk_serial_kernel", [_tensor(), _tensor(), 4096], [4096],
                CHUNK=64, num_warps=2)
    finding = _only(diagnose([k], _memory_cost()), "serial_reduction")
    loop = _line_of("triton_chunk_serial.py", "for start in range")
    assert finding.evidence.startswith(f"line {loop}: ") and "64-element tensor" in finding.evidence
    assert "tl.sum" in finding.hint and finding.kernel == "chunk_serial_kernel"
    # the same loop over 1024-wide chunks on 4 warps reduces 8 elements per thread each time: not the defect
    wide = _triton("triton_chunk_serial.py", "chunk_serial_kernel", [_tensor(), _tensor(), 4096], [4096],
                   CHUNK=1024, num_warps=4)
    assert "serial_reduction" not in _codes(diagnose([wide], _memory_cost()))
    # a GEMM-like cost is not judged for reductions
    assert "serial_reduction" not in _codes(diagnose([k], _gemm_cost()))


@needs_compilers
def test_triton_lane_per_row_loads_are_uncoalesced():
    k = _triton("triton_column_walk.py", "column_walk_kernel", [_tensor(), _tensor(), 4096, 4096], [32],
                ROWS=128, num_warps=4)
    finding = _only(diagnose([k], _memory_cost()), "uncoalesced_access")
    assert finding.evidence.startswith(f"line {_line_of('triton_column_walk.py', 'acc += tl.load')}: ")
    assert "tl.arange x the runtime value N" in finding.evidence


@needs_compilers
def test_triton_round_trip_through_bf16():
    k = _triton("triton_bf16_round_trip.py", "bf16_round_trip_kernel", [_tensor("bfloat16"), _tensor("bfloat16"),
                4096], [4096], BLOCK=1024, num_warps=4)
    findings = diagnose([k], _memory_cost())
    assert _codes(findings) == ["dtype_round_trip"]
    line = _line_of("triton_bf16_round_trip.py", "(x * x).to(tl.bfloat16)")
    assert findings[0].evidence.startswith(f"line {line}: f32 -> bf16 -> f32")
    assert "arith.truncf" in findings[0].evidence and "arith.extf" in findings[0].evidence


@needs_compilers
def test_triton_block_smaller_than_the_program_leaves_threads_idle():
    args = [_tensor(), _tensor(), 4096]
    k = _triton("triton_idle_lanes.py", "idle_lanes_kernel", args, [4096], BLOCK=64, num_warps=8)
    finding = _only(diagnose([k], _memory_cost()), "idle_threads")
    assert "64 element(s) on 8 warps (256 threads)" in finding.evidence
    # a grid too small to fill the GPU is a different problem; 2 warps give each thread its element
    assert "idle_threads" not in _codes(diagnose([k.model_copy(update={"grid": [64]})], _memory_cost()))
    fitted = _triton("triton_idle_lanes.py", "idle_lanes_kernel", args, [4096], BLOCK=64, num_warps=2)
    assert "idle_threads" not in _codes(diagnose([fitted], _memory_cost()))


@needs_compilers
def test_triton_gemm_with_one_stage_is_not_pipelined():
    args = [_tensor("float16")] * 3 + [4096] * 3
    one = _triton("triton_gemm_tiles.py", "gemm_tiles_kernel", args, [1024], BM=128, BN=128, BK=32,
                  num_warps=8, num_stages=1)
    findings = diagnose([one], _gemm_cost())
    assert _codes(findings) == ["no_pipelining"]
    assert findings[0].evidence.startswith(f"line {_line_of('triton_gemm_tiles.py', 'for k in range')}: ")
    assert "num_stages=1" in findings[0].evidence
    three = _triton("triton_gemm_tiles.py", "gemm_tiles_kernel", args, [1024], BM=128, BN=128, BK=32,
                    num_warps=8, num_stages=3)
    assert "cp.async" in three.asm["ptx"]
    assert diagnose([three], _gemm_cost()) == []


@needs_compilers
def test_triton_gemm_on_32x32_tiles_is_small_tiles():
    args = [_tensor("float16")] * 3 + [4096] * 3
    k = _triton("triton_gemm_tiles.py", "gemm_tiles_kernel", args, [128 * 128], BM=32, BN=32, BK=32,
                num_warps=4, num_stages=3)
    findings = diagnose([k], _gemm_cost())
    assert _codes(findings) == ["small_tiles"]
    assert "32x32 tiles over 16384 programs" in findings[0].evidence and "autotune" in findings[0].hint
    # the same tiles on a problem that 128x128 tiles could not spread over every SM are fine
    assert diagnose([k.model_copy(update={"grid": [256]})], _gemm_cost(512)) == []


# --- TileLang --------------------------------------------------------------------------------


@needs_compilers
def test_tilelang_thread_per_row(compile_cache_dir):
    import torch

    k = _tilelang("tilelang_lane_per_row.py", [torch.rand(256, 512)], compile_cache_dir)
    findings = diagnose([k], _memory_cost())
    serial = _only(findings, "serial_reduction")
    assert serial.evidence.startswith("`for (int j = 0; j < 512; ++j) {` updates acc[0]")
    assert "T.reduce_sum" in serial.hint
    strided = _only(findings, "uncoalesced_access")
    assert "threadIdx.x) * 512)" in strided.evidence and "2048 bytes apart" in strided.evidence


@needs_compilers
def test_tilelang_fragment_replicated_in_every_thread(compile_cache_dir):
    import torch

    k = _tilelang("tilelang_replicated_tile.py", [torch.rand(256, 2048)], compile_cache_dir)
    finding = _only(diagnose([k], _memory_cost()), "replicated_fragment")
    assert finding.evidence.startswith("`float xs[512];` per thread")
    assert "all 128 threads load and hold the same 512 elements" in finding.evidence
    assert "T.reduce_sum" in finding.hint


# --- CUDA ------------------------------------------------------------------------------------


@needs_compilers
def test_cuda_thread_per_row(compile_cache_dir):
    k = _cuda("cuda_thread_per_row.py", "row_per_thread_kernel", [32], 128, compile_cache_dir)
    findings = diagnose([k], _memory_cost())
    serial = _only(findings, "serial_reduction")
    assert "acc += x[r * cols + j]" in serial.evidence and "__shfl_xor_sync" in serial.hint
    strided = _only(findings, "uncoalesced_access")
    assert "index x cols elements apart" in strided.evidence


@needs_compilers
def test_cuda_half_round_trip_with_a_proper_warp_reduction(compile_cache_dir):
    k = _cuda("cuda_half_round_trip.py", "half_round_trip_kernel", [4096], 32, compile_cache_dir)
    findings = diagnose([k], _memory_cost())
    finding = _only(findings, "dtype_round_trip")
    assert "f32 -> f16 -> f32" in finding.evidence and "cvt.rn.f16.f32" in finding.evidence
    assert "serial_reduction" not in _codes(findings)  # the shuffle tree is there


@needs_compilers
def test_cuda_single_buffered_wmma_gemm(compile_cache_dir):
    k = _cuda("cuda_wmma_one_buffer.py", "wmma_one_buffer_kernel", [64, 64], 128, compile_cache_dir)
    assert "mma.sync" in k.asm["ptx"] and "cp.async" not in k.asm["ptx"]
    finding = _only(diagnose([k], _gemm_cost()), "no_pipelining")
    assert "2 bar.sync per iteration" in finding.evidence and "cp.async" in finding.hint


# --- the good examples gain no finding -------------------------------------------------------


def _good_cases():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from screen_examples import CASES
    finally:
        sys.path.remove(str(EXAMPLES))
    good = [c for c in CASES if c.candidate.endswith("_good.py") or c.candidate == "triton/layernorm_split.py"]
    firsts = {}
    for case in good:  # one screen per good file (the bf16 and second-problem cases compile the same code)
        firsts.setdefault(case.candidate, case)
    return list(firsts.values())


GOOD_CASES = _good_cases()

ALLOWED_TODAY = {"layernorm_split_kb": {"extra_passes", "scalar_global_loads"}}
"""Findings good examples had before these rules: the split LayerNorm's three launches by design,
and at this CPU shape its combine kernel's one-element block (scalar loads)."""


GOOD_CACHE = Path(os.environ.get("KERNELGATE_TEST_CACHE_DIR", Path.home() / ".cache" / "kernelgate" / "test-compile"))
"""Where the good examples' compiled code is kept between runs: their CUDA extensions take nvcc about
25 s each with torch's headers. Entries are keyed by source, flags and nvcc version, so a hit is the
same artifact; delete the folder (or point the variable elsewhere) to compile from scratch."""


@pytest.fixture(scope="module")
def good_verdicts():
    """Every good example screened once, two at a time (static checks: numerics are other tests' business)."""
    from kernelgate import Candidate, Problem, ScreenOptions
    from kernelgate.many import screen_many

    options = ScreenOptions(numerics_trials=1, interpreter_max_elements=1, compile_cache_dir=str(GOOD_CACHE))
    items = [(Candidate(source=(EXAMPLES / c.candidate).read_text(), name=c.name),
              Problem(kind="kernelbench_file", name=str(EXAMPLES / c.problem), shape=c.cpu_shape)) for c in GOOD_CASES]
    return {GOOD_CASES[r.index].name: r for r in screen_many(items, options=options, cpu_lanes=2)}


def test_good_cases_cover_every_good_example():
    files = {c.candidate for c in GOOD_CASES}
    for dsl in ("triton", "tilelang", "cuda"):
        assert {f"{dsl}/{p.name}" for p in (EXAMPLES / dsl).glob("*_good.py")} <= files
    assert "triton/layernorm_split.py" in files


@needs_compilers
@pytest.mark.slow
@pytest.mark.parametrize("name", [c.name for c in GOOD_CASES])
def test_good_example_gains_no_finding(good_verdicts, name):
    result = good_verdicts[name]
    assert result.verdict is not None, result.error
    verdict = result.verdict
    assert verdict.failure is None, verdict.failure
    assert verdict.kernels, "no kernel artifacts: nothing was diagnosed"
    new = {f.code for f in verdict.findings} - ALLOWED_TODAY.get(name, set())
    assert not new, [f"{f.code}: {f.evidence}" for f in verdict.findings if f.code in new]


def test_copies_around_the_kernel_are_a_wrapper_copies_finding():
    """forward that copies its input before the kernel (x.clone(), x.t().contiguous()) gets a finding; the
    same kernel without the copy gets none."""
    from kernelgate import Candidate, Problem, screen
    from tests.conftest import fixture_source

    problem = Problem.op("rowsum", rows=16, cols=256)
    good = fixture_source("rowsum_good.py")
    copying = good.replace("    rows, n = x.shape\n", "    x = x.t().contiguous().t().clone()\n    rows, n = x.shape\n", 1)
    assert copying != good
    verdict = screen(Candidate(source=copying, entry="kernel", name="copying"), problem)
    (finding,) = [f for f in verdict.findings if f.code == "wrapper_copies"]
    assert finding.kind == "repairable" and "contiguous of 4,096 elements" in finding.evidence
    assert "clone of 4,096 elements" in finding.evidence
    plain = screen(Candidate(source=good, entry="kernel", name="plain"), problem)
    assert not any(f.code == "wrapper_copies" for f in plain.findings)


def test_tilelang_gemm_on_small_unpipelined_tiles_is_named(compile_cache_dir):
    """The study's slow bf16 GEMM (32x32x32 tiles, num_stages=0) gets warp_level_mma and no_pipelining,
    though its PTX holds a TMA store; the fast one (128x256 tiles, 4 stages, warp-specialized) gets neither."""
    import torch

    a, b = torch.rand(512, 512).bfloat16(), torch.rand(512, 512).bfloat16()
    cost = _gemm_cost(512)
    slow = _tilelang("matmul_bf16_slow.py", [a, b], compile_cache_dir, EXAMPLES / "tilelang", "bfloat16")
    codes = {f.code: f for f in diagnose([slow], cost)}
    assert {"warp_level_mma", "no_pipelining"} <= set(codes)
    assert "mma.sync" in codes["warp_level_mma"].evidence and "wgmma" in codes["warp_level_mma"].hint
    fast = _tilelang("matmul_bf16_fast.py", [a, b], compile_cache_dir, EXAMPLES / "tilelang", "bfloat16")
    assert not {"warp_level_mma", "no_pipelining"} & {f.code for f in diagnose([fast], cost)}
