"""Static diagnosis: authoring defects visible in the compiled artifacts of the launched kernels.

Each rule looks at one ``KernelArtifact`` (and the problem's cost) and may return a ``Finding``
with its evidence and a fix hint. Rules work the same on artifacts from a GPU run and on
ahead-of-time artifacts compiled without one.
"""

from __future__ import annotations

import re

from kernelgate.models import Cost, Finding, KernelArtifact

__all__ = ["diagnose", "RULES", "DEFAULT_SM_COUNT"]

DEFAULT_SM_COUNT = 132
"""SMs of an H100/H200 SXM: the sm_90 target of ahead-of-time artifacts."""

_VECTOR_LOAD = re.compile(r"ld\.global(?:\.\w+)*\.v[248]\.")
_ANY_LOAD = re.compile(r"ld\.global")
_TENSOR_CORE = re.compile(r"\b(?:mma\.sync|wgmma\.mma_async|HMMA|HGMMA)\b")
_ARITH = r"\b(?:add|sub|mul|fma|mad|div|sqrt|rsqrt|rcp|neg|abs|min|max)(?:\.\w+)*"
_F64_ARITH = re.compile(_ARITH + r"\.f64\b")
_F32_ARITH = re.compile(_ARITH + r"\.f32\b")
FP64_SHARE = 0.1
"""fp64 arithmetic is a finding when it is at least this share of the floating-point arithmetic:
a per-row ``1 / sqrt(double)`` or a conversion of a double argument is not the defect, fp64
accumulation in the main loop is."""

_HINTS = {
    "scalar_global_loads": {
        "triton": "load contiguous blocks (tl.arange over a BLOCK of 4+ elements per thread) so the compiler "
                  "emits 16-byte vector loads",
        "tilelang": "copy whole tiles with T.copy into shared memory or fragments (contiguous last dim), so the "
                    "generated code uses 16-byte vector loads",
        "cuda": "have each thread load 16 bytes at a time (float4 / reinterpret_cast of aligned pointers), "
                "consecutive threads on consecutive addresses",
    },
    "no_tensor_cores": {
        "triton": "compute tiles with tl.dot on fp16/bf16 operands so the compiler uses tensor cores",
        "tilelang": "compute tiles with T.gemm on fp16/bf16 operands staged in shared memory",
        "cuda": "use tensor cores (mma.sync / WMMA fragments, or wgmma on sm_90a) for the tile products",
    },
    "no_shared_memory_tiling": {
        "triton": "tile the output (e.g. 128x128 per program) and accumulate tl.dot over K blocks so operands "
                  "are staged and reused",
        "tilelang": "tile the output (e.g. 128x128 per block), T.copy A and B tiles into T.alloc_shared buffers "
                    "inside T.Pipelined over K, and T.gemm them",
        "cuda": "stage A and B tiles in __shared__ memory and compute a register tile per thread from them, "
                "so each operand is read from global memory once per tile",
    },
    "tiny_block": {
        "triton": "use blocks of 1024+ elements (a power of two) and 4-8 warps so each program moves wide vectors",
        "tilelang": "use 128-256 threads per block and tiles of 1024+ elements",
        "cuda": "launch 128-256 threads per block, each handling a vector of elements",
    },
}


def _hint(code: str, dsl: str) -> str:
    """The fix for ``code`` in the candidate's own DSL."""
    by_dsl = _HINTS[code]
    return by_dsl.get(dsl, by_dsl["triton"])


def _tiny_block(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    threads = k.constexprs.get("threads")
    if isinstance(threads, int) and threads < 32:
        return Finding(code="tiny_block", kind="repairable", kernel=k.name,
                       evidence=f"{threads} thread(s) per block: {32 - threads} of 32 lanes of each warp idle",
                       hint=_hint("tiny_block", k.dsl))
    blocks = [v for n, v in k.constexprs.items() if n.upper().startswith("BLOCK") and isinstance(v, int)]
    if k.num_warps == 1 and blocks and max(blocks) <= 64:
        return Finding(code="tiny_block", kind="repairable", kernel=k.name,
                       evidence=f"num_warps=1, block sizes {blocks}",
                       hint=_hint("tiny_block", k.dsl))
    return None


def _scalar_loads(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    ptx = k.asm.get("ptx", "")
    loads = len(_ANY_LOAD.findall(ptx))
    if loads and not _VECTOR_LOAD.search(ptx):
        return Finding(code="scalar_global_loads", kind="repairable", kernel=k.name,
                       evidence=f"{loads} ld.global in the PTX, none vectorized (.v2/.v4)",
                       hint=_hint("scalar_global_loads", k.dsl))
    return None


def _too_few_blocks(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    if not k.grid:
        return None
    programs = 1
    for g in k.grid:
        programs *= max(1, g)
    big = cost is not None and cost.bytes_compulsory > 64 * (1 << 20)
    if programs < sm_count and big:
        return Finding(code="too_few_blocks", kind="repairable", kernel=k.name,
                       evidence=f"grid {k.grid} = {programs} programs for {sm_count} SMs",
                       hint="split each row (or the reduction) over several programs, e.g. partial results in a "
                            "first kernel and a small combine, so every SM has work")
    return None


def _spills(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    if k.spill_bytes:
        return Finding(code="register_spills", kind="repairable", kernel=k.name,
                       evidence=f"{k.spill_bytes} bytes of spill stores/loads, {k.registers} registers",
                       hint="shrink the block or the number of live values per thread, or raise num_warps")
    return None


def _matmul_without_tiles(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    intensive = cost is not None and cost.bytes_compulsory > 0 and cost.flops / cost.bytes_compulsory > 32
    if not intensive:
        return None
    ptx, sass = k.asm.get("ptx", ""), k.asm.get("sass", "")
    if cost.math_mode.value in ("fp16", "bf16") and not _TENSOR_CORE.search(ptx + sass):
        return Finding(code="no_tensor_cores", kind="repairable", kernel=k.name,
                       evidence="no mma/wgmma instruction in the PTX/SASS of a GEMM-like kernel",
                       hint=_hint("no_tensor_cores", k.dsl))
    if not k.shared_bytes:
        return Finding(code="no_shared_memory_tiling", kind="repairable", kernel=k.name,
                       evidence="0 bytes of shared memory in a GEMM-like kernel: operands are re-read from memory",
                       hint=_hint("no_shared_memory_tiling", k.dsl))
    return None


def _fp64(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    ptx = k.asm.get("ptx", "")
    f64, f32 = len(_F64_ARITH.findall(ptx)), len(_F32_ARITH.findall(ptx))
    if f64 and cost is not None and f64 >= FP64_SHARE * (f64 + f32):
        return Finding(code="fp64_arithmetic", kind="repairable", kernel=k.name,
                       evidence=f"{f64} fp64 arithmetic instructions in the PTX (and {f32} fp32)",
                       hint="keep accumulators in fp32; fp64 runs at a fraction of the fp32 rate")
    return None


RULES = (_tiny_block, _scalar_loads, _too_few_blocks, _spills, _matmul_without_tiles, _fp64)
"""Per-kernel rules, in order."""

HELPER_RULES = (_spills, _fp64)
"""Rules that still apply to a helper kernel (few programs, beside a kernel that fills the GPU)."""


def _programs(k: KernelArtifact) -> int:
    programs = 1
    for g in k.grid or [0]:
        programs *= max(0, g)
    return programs


def _extra_passes(kernels: list[KernelArtifact], cost: Cost | None) -> Finding | None:
    memory_bound = cost is not None and cost.bytes_compulsory > 0 and cost.flops / cost.bytes_compulsory < 8
    launches = sum(k.launches for k in kernels)
    if memory_bound and launches >= 3:
        names = ", ".join(f"{k.name} x{k.launches}" for k in kernels)
        return Finding(code="extra_passes", kind="repairable", evidence=f"{launches} kernel launches per call ({names})",
                       hint="fuse the passes into one kernel that keeps the row in registers, so memory is "
                            "read once and written once")
    return None


def diagnose(kernels: list[KernelArtifact], cost: Cost | None, sm_count: int | None = None) -> list[Finding]:
    """Every finding of every rule on every launched kernel."""
    sms = sm_count or DEFAULT_SM_COUNT
    wide = any(_programs(k) >= sms for k in kernels)
    findings = []
    for k in kernels:
        # a small-grid kernel beside a wide one is a helper (a combine step): its shape is not the defect
        helper = wide and _programs(k) < sms
        findings += [f for rule in (HELPER_RULES if helper else RULES) if (f := rule(k, cost, sms)) is not None]
    if (extra := _extra_passes(kernels, cost)) is not None:
        findings.append(extra)
    return findings
