"""The diagnosis rules: one function per finding, each reading one kernel's facts and the problem's cost.

A rule returns a ``Defect`` (the finding's code and evidence) or None; ``diagnose`` adds the kernel
and the hint. Rules read only ``KernelFacts``: what a DSL's artifacts show is the plug-in's job.

=======================  ===================================================================
code                     rule
=======================  ===================================================================
serial_reduction         a serial reduction seen, on a problem of at most
                         ``REDUCTION_INTENSITY`` flops per byte
replicated_fragment      a tile replicated in every thread seen
tiny_block               fewer than 32 threads, or one warp on blocks of at most 64 elements
scalar_global_loads      global loads, none of them vector loads
uncoalesced_access       strided access by adjacent threads seen
idle_threads             idle threads seen, in a grid that fills the GPU (and no tiny_block)
too_few_blocks           fewer programs than SMs on a problem over ``LARGE_PROBLEM_BYTES``
register_spills          spill bytes
no_tensor_cores          above ``GEMM_INTENSITY``, fp16/bf16 math, no tensor-core instruction
no_shared_memory_tiling  above ``GEMM_INTENSITY``, no shared memory
no_pipelining            an unpipelined K loop seen
warp_level_mma           warp-level MMA on Hopper, at ``COMPUTE_BOUND_INTENSITY`` or more
small_tiles              tile products of at most ``SMALL_TILE_ELEMENTS`` where
                         ``LARGE_TILE_ELEMENTS`` tiles would still give every SM one
dtype_round_trip         a narrowing conversion widened straight back seen
fp64_arithmetic          fp64 at least ``FP64_SHARE`` of the floating-point arithmetic
extra_passes             (all kernels) ``EXTRA_PASS_LAUNCHES`` or more launches per call on a
                         problem under ``MEMORY_BOUND_INTENSITY`` flops per byte
=======================  ===================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from kernelgate.diagnosis.facts import KernelFacts
from kernelgate.models import Cost

__all__ = ["Defect", "Rule", "RULES", "HELPER_RULES", "rules_for", "extra_passes", "programs"]


class Defect(NamedTuple):
    """What a rule found in one kernel: the finding's code and its evidence."""

    code: str
    evidence: str


Rule = Callable[[KernelFacts, "Cost | None", int], "Defect | None"]

REDUCTION_INTENSITY = 2.0
"""Serial reductions are judged on problems of at most this many flops per compulsory byte (sums,
norms, softmax: 0.25-1.5); above it (matmul, even at small test shapes) one thread's loop over K
is the normal form of the computation, and other rules speak to it."""

LARGE_PROBLEM_BYTES = 64 * (1 << 20)
"""A problem moving more than this is worth every SM: fewer programs than SMs is a finding."""

GEMM_INTENSITY = 32.0
"""FLOP per compulsory byte above which a kernel is GEMM-like: it should tile through shared memory."""

COMPUTE_BOUND_INTENSITY = 64.0
"""FLOP per compulsory byte above which a problem is a tensor-core GEMM or convolution at heart (an
H200 turns compute-bound near 160 in fp16): where the kind of MMA instruction matters."""

SMALL_TILE_ELEMENTS = 64 * 64
"""Tile products of at most this many output elements re-read each operand element N/64 times."""

LARGE_TILE_ELEMENTS = 128 * 128
"""The tile a GEMM should use when the problem still gives every SM one at this size."""

FP64_SHARE = 0.1
"""fp64 arithmetic is a finding when it is at least this share of the floating-point arithmetic:
a per-row ``1 / sqrt(double)`` or a conversion of a double argument is not the defect, fp64
accumulation in the main loop is."""

MEMORY_BOUND_INTENSITY = 8.0
"""FLOP per compulsory byte below which every extra pass over memory costs its full time."""

EXTRA_PASS_LAUNCHES = 3
"""Launches per call from which a memory-bound problem is read more often than it needs."""


def _intensity(cost: Cost | None) -> float | None:
    if cost is None or cost.bytes_compulsory <= 0:
        return None
    return cost.flops / cost.bytes_compulsory


def programs(f: KernelFacts) -> int:
    """Programs (blocks) of the kernel's grid; 0 when the grid is unknown."""
    return math.prod(max(0, g) for g in f.grid or (0,))


def _seen(code: str, evidence: str | None) -> Defect | None:
    return Defect(code, evidence) if evidence else None


# --- per-kernel rules ------------------------------------------------------------------------


def serial_reduction(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    """A reduction walked by one thread's loop, on a memory-bound problem."""
    intensity = _intensity(cost)
    if intensity is None or intensity > REDUCTION_INTENSITY:
        return None
    return _seen("serial_reduction", f.serial_reduction)


def replicated_fragment(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    return _seen("replicated_fragment", f.replicated_fragment)


def tiny_block(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    if f.threads is not None and f.threads < 32:
        return Defect("tiny_block", f"{f.threads} thread(s) per block: {32 - f.threads} of 32 lanes of each warp idle")
    if f.num_warps == 1 and f.block_sizes and max(f.block_sizes) <= 64:
        return Defect("tiny_block", f"num_warps=1, block sizes {list(f.block_sizes)}")
    return None


def scalar_global_loads(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    if f.global_loads and not f.vector_loads:
        return Defect("scalar_global_loads", f"{f.global_loads} ld.global in the PTX, none vectorized (.v2/.v4)")
    return None


def uncoalesced_access(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    return _seen("uncoalesced_access", f.uncoalesced_access)


def idle_threads(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    """Threads with no element of their own, in a grid that fills the GPU (a tiny block says it first)."""
    if not f.threads or programs(f) < sm_count or tiny_block(f, cost, sm_count) is not None:
        return None
    return _seen("idle_threads", f.idle_threads)


def too_few_blocks(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    if not f.grid:
        return None
    blocks = math.prod(max(1, g) for g in f.grid)
    if blocks < sm_count and cost is not None and cost.bytes_compulsory > LARGE_PROBLEM_BYTES:
        return Defect("too_few_blocks", f"grid {list(f.grid)} = {blocks} programs for {sm_count} SMs")
    return None


def register_spills(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    if f.spill_bytes:
        return Defect("register_spills", f"{f.spill_bytes} bytes of spill stores/loads, {f.registers} registers")
    return None


def matmul_without_tiles(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    """A GEMM-like kernel without tensor cores (16-bit math) or without shared memory."""
    intensity = _intensity(cost)
    if intensity is None or intensity <= GEMM_INTENSITY:
        return None
    if cost.math_mode.value in ("fp16", "bf16") and not f.tensor_cores:
        return Defect("no_tensor_cores", "no mma/wgmma instruction in the PTX/SASS of a GEMM-like kernel")
    if not f.shared_bytes:
        return Defect("no_shared_memory_tiling",
                      "0 bytes of shared memory in a GEMM-like kernel: operands are re-read from memory")
    return None


def no_pipelining(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    return _seen("no_pipelining", f.unpipelined_k_loop)


def warp_level_mma(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    """A compute-bound GEMM on Ampere's warp-level mma.sync where Hopper's warpgroup wgmma is there."""
    intensity = _intensity(cost)
    if f.warp_mma is None or intensity is None or intensity < COMPUTE_BOUND_INTENSITY:
        return None
    return Defect("warp_level_mma", f"{f.warp_mma.count} `{f.warp_mma.first}` and no wgmma.mma_async in the PTX on "
                                    f"sm_90: the tensor cores run at the older warp-level rate")


def small_tiles(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    """Small tile products where large ones would still give every SM a tile."""
    if f.tile_product is None:
        return None
    dims = f.tile_product.shape
    tile, n = math.prod(dims), programs(f)
    if tile > SMALL_TILE_ELEMENTS or n * tile < sm_count * LARGE_TILE_ELEMENTS:
        return None
    where = f"line {f.tile_product.source_line}: " if f.tile_product.source_line else ""
    shape = "x".join(map(str, dims))
    return Defect("small_tiles",
                  f"{where}{f.tile_product.instruction} on {shape} tiles over {n} programs: A and B are re-read once "
                  f"per tile, up to {128 // min(dims[-2:])}x as often as with 128x128 tiles, which would still give "
                  f"{n * tile // LARGE_TILE_ELEMENTS} programs for {sm_count} SMs")


def dtype_round_trip(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    return _seen("dtype_round_trip", f.dtype_round_trip)


def fp64_arithmetic(f: KernelFacts, cost: Cost | None, sm_count: int) -> Defect | None:
    f64, f32 = f.fp64_ops, f.fp32_ops
    if f64 and cost is not None and f64 >= FP64_SHARE * (f64 + f32):
        return Defect("fp64_arithmetic", f"{f64} fp64 arithmetic instructions in the PTX (and {f32} fp32)")
    return None


RULES: tuple[Rule, ...] = (
    serial_reduction, replicated_fragment, tiny_block, scalar_global_loads, uncoalesced_access, idle_threads,
    too_few_blocks, register_spills, matmul_without_tiles, no_pipelining, warp_level_mma, small_tiles,
    dtype_round_trip, fp64_arithmetic)
"""Per-kernel rules, in order (feedback quotes the first findings first)."""

HELPER_RULES: tuple[Rule, ...] = (register_spills, fp64_arithmetic)
"""Rules that still apply to a helper kernel (few programs, beside a kernel that fills the GPU)."""


def rules_for(f: KernelFacts, launched: list[KernelFacts], sm_count: int) -> tuple[Rule, ...]:
    """The rules that apply to one of the launched kernels.

    A small-grid kernel beside one that fills the GPU is a helper (a combine step): its shape is not
    the defect. When one kernel runs the matmul on tensor cores, the others (a layout pass) are not
    GEMMs."""
    wide = any(programs(other) >= sm_count for other in launched)
    rules = HELPER_RULES if wide and programs(f) < sm_count else RULES
    if any(other.tensor_cores for other in launched) and not f.tensor_cores:
        rules = tuple(r for r in rules if r is not matmul_without_tiles)
    return rules


def extra_passes(launched: list[KernelFacts], cost: Cost | None) -> Defect | None:
    """Several launches per call on a memory-bound problem: each re-reads what the last one wrote."""
    intensity = _intensity(cost)
    launches = sum(f.launches for f in launched)
    if intensity is not None and intensity < MEMORY_BOUND_INTENSITY and launches >= EXTRA_PASS_LAUNCHES:
        names = ", ".join(f"{f.kernel} x{f.launches}" for f in launched)
        return Defect("extra_passes", f"{launches} kernel launches per call ({names})")
    return None
