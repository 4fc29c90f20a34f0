"""Tests for the split between DSL plug-ins (kernel facts, hints) and the diagnosis rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kernelgate.dsl as dsl_registry
from kernelgate.diagnosis import diagnose, kernel_facts
from kernelgate.diagnosis.facts import KernelFacts, TileProduct, WarpMma
from kernelgate.diagnosis.hints import GENERIC_HINTS
from kernelgate.dsl import cuda_facts, tilelang_facts, triton_facts

from .test_diagnosis import (CUDA_SERIAL, DSL_WORDED_CODES, MMA_PTX, SCALAR_PTX, SHFL_PTX, TTGIR_SMALL_DOT,
                             _cuda_kernel, _kernel, _memory_cost)

PACKAGE = Path(__file__).resolve().parent.parent / "kernelgate"


def test_diagnosing_every_dsl_imports_no_dsl_package():
    # the fixtures' module by its folder: ./kg runs with PYTHONSAFEPATH, so "tests" is not importable
    script = f"""
import sys
sys.path.insert(0, {str(PACKAGE.parent / "tests")!r})
from kernelgate.diagnosis import diagnose
from test_diagnosis import _kernel, _tl_kernel, _cuda_kernel, _memory_cost, TL_SERIAL, CUDA_SERIAL, SCALAR_PTX
kernels = [_kernel(asm={{"ptx": SCALAR_PTX}}), _tl_kernel(TL_SERIAL, 128), _cuda_kernel(CUDA_SERIAL)]
codes = {{f.code for f in diagnose(kernels, _memory_cost(intensity=0.25))}}
print(sorted(codes))
print(sorted(m for m in ("torch", "triton", "tilelang", "tvm") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=PACKAGE.parent,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    codes, loaded = done.stdout.strip().splitlines()[-2:]
    assert "serial_reduction" in codes and "scalar_global_loads" in codes  # the plug-ins' facts were read
    assert loaded == "[]"


def test_the_diagnosis_package_names_no_dsl():
    for path in (PACKAGE / "diagnosis").glob("*.py"):
        text = path.read_text()
        for name in ('"triton"', '"tilelang"', '"cuda"', "'triton'", "'tilelang'", "'cuda'"):
            assert name not in text, f"{path.name} names {name}"


def test_every_finding_code_has_a_generic_hint():
    assert DSL_WORDED_CODES | {"too_few_blocks", "register_spills", "fp64_arithmetic", "extra_passes"} == set(
        GENERIC_HINTS)


# --- a DSL with no facts provider, and a new one with its own ------------------------------


def test_unknown_dsl_gets_the_artifact_model_facts_and_generic_hints():
    k = _kernel(dsl="unregistered", num_warps=1, constexprs={"BLOCK_SIZE": 32}, spill_bytes=64,
                asm={"ptx": SCALAR_PTX})
    assert kernel_facts(k) == KernelFacts.from_artifact(k)
    findings = diagnose([k], _memory_cost())
    # no plug-in reads its PTX: scalar loads go unseen; what the artifact model states is judged
    assert [f.code for f in findings] == ["tiny_block", "register_spills"]
    assert findings[0].hint == GENERIC_HINTS["tiny_block"]
    assert findings[0].hint != triton_facts.HINTS["tiny_block"]


class _ToyPlugin:
    """A fourth DSL as a plug-in supplies it: facts from its own artifact, hints in its own words."""

    name = "toy"

    @staticmethod
    def facts(k):
        return KernelFacts(kernel=k.name, grid=tuple(k.grid), spill_bytes=k.spill_bytes,
                           serial_reduction=k.asm.get("toy_ir"))

    hints = {"serial_reduction": "use toy.tree_sum"}


@pytest.fixture
def toy_registered(monkeypatch):
    dsl_registry.plugins()  # built-ins first, so the toy is not lost when they load
    monkeypatch.setitem(dsl_registry._REGISTRY, "toy", _ToyPlugin())


def test_a_new_dsl_supplies_facts_and_hints_through_its_plugin(toy_registered):
    k = _kernel(dsl="toy", asm={"toy_ir": "loop: acc += x[i]"}, grid=[4096])
    (finding,) = diagnose([k], _memory_cost(intensity=0.25))
    assert (finding.code, finding.evidence, finding.hint) == ("serial_reduction", "loop: acc += x[i]",
                                                             "use toy.tree_sum")
    # a code the plug-in has no words for gets the generic hint
    (finding,) = diagnose([_kernel(dsl="toy", asm={}, grid=[4096], spill_bytes=8)], _memory_cost())
    assert finding.code == "register_spills" and finding.hint == GENERIC_HINTS["register_spills"]


# --- the built-in plug-ins' facts ----------------------------------------------------------


def test_artifact_facts_threads_come_from_the_declared_count_else_the_warps():
    assert KernelFacts.from_artifact(_kernel(num_warps=4, constexprs={"threads": 96})).threads == 96
    assert KernelFacts.from_artifact(_kernel(num_warps=4, constexprs={"BLOCK_M": 64, "N": 8})).threads == 128
    assert KernelFacts.from_artifact(_kernel(num_warps=4, constexprs={"BLOCK_M": 64, "N": 8})).block_sizes == (64,)
    assert KernelFacts.from_artifact(_kernel(num_warps=None, constexprs={})).threads is None


def test_triton_facts_read_the_tile_product_from_ttgir():
    facts = triton_facts.facts(_kernel(asm={"ttgir": TTGIR_SMALL_DOT, "ptx": MMA_PTX}))
    assert facts.tile_product == TileProduct(shape=(32, 32), instruction="tl.dot", source_line=18)
    assert facts.tensor_cores and facts.warp_mma is None  # Triton picks the MMA instruction itself


def test_tilelang_and_cuda_facts_report_warp_level_mma_on_hopper():
    k = _kernel(dsl="tilelang", target="cuda:90a", asm={"ptx": MMA_PTX})
    expected = WarpMma(count=1, first="mma.sync.aligned.m16n8k16")
    assert tilelang_facts.facts(k).warp_mma == expected
    assert cuda_facts.facts(k.model_copy(update={"dsl": "cuda"})).warp_mma == expected
    assert tilelang_facts.facts(k.model_copy(update={"target": "cuda:80"})).warp_mma is None


def test_cuda_facts_see_a_serial_loop_only_without_a_cross_thread_step():
    assert cuda_facts.facts(_cuda_kernel(CUDA_SERIAL)).serial_reduction.startswith("`for (int64_t j = 0;")
    assert cuda_facts.facts(_cuda_kernel(CUDA_SERIAL, ptx=SHFL_PTX)).serial_reduction is None


def test_ptx_facts_count_loads_and_their_width():
    facts = cuda_facts.facts(_kernel(dsl="cuda", asm={"ptx": SCALAR_PTX}))
    assert (facts.global_loads, facts.vector_loads, facts.tensor_cores) == (2, 0, False)
