"""TileLang kernel facts from its generated CUDA and PTX, and the fix for each finding in TileLang's terms.

TileLang lowers a prim_func to CUDA C in a fixed style: fragments are per-thread arrays, thread
indices read ``((int)threadIdx.x)``, reductions across threads call ``tl::AllReduce``. What is
read from that source:

=====================  =======================================================================
fact                   generated-CUDA signal
=====================  =======================================================================
serial_reduction       a loop updating ``acc[0]`` from itself, and no cross-thread reduction
replicated_fragment    a per-thread array of >= ``REPLICATED_MIN_ELEMENTS`` filled from global
                       memory without ``threadIdx``, or reduced whole with no AllReduce
uncoalesced_access     ``((int)threadIdx.x) * C`` in a global index, C elements >=
                       ``STRIDE_MIN_BYTES`` apart (or a variable C)
idle_threads           ``if (((int)threadIdx.x) < K)`` with K at most half the threads, no else
unpipelined_k_loop     an outer loop of tensor-core products that stages each K slice in shared
                       memory behind a barrier with no cp.async or TMA copy
=====================  =======================================================================

The instruction mix and dtype round trips come from the PTX (``ptx_facts``), and ``warp_mma``
too: TileLang's tile shape and thread count decide between ``mma.sync`` and ``wgmma``.
"""

from __future__ import annotations

import dataclasses
import re

from kernelgate.diagnosis.facts import KernelFacts
from kernelgate.dsl._text import block, c_loops, index_expressions, quote
from kernelgate.dsl.ptx_facts import TENSOR_CORE, ptx_facts, warp_mma
from kernelgate.models import KernelArtifact

__all__ = ["facts", "HINTS", "REPLICATED_MIN_ELEMENTS", "STRIDE_MIN_BYTES"]

REPLICATED_MIN_ELEMENTS = 64
"""A per-thread array this long that every thread fills alike is a replicated tile, not a few
broadcast scalars (a row's shift, a mean)."""

STRIDE_MIN_BYTES = 128
"""Adjacent threads this far apart touch a different 128-byte line each: a warp-wide access
moves 32 lines for 32 useful elements."""

HINTS = {
    "scalar_global_loads": "copy whole tiles with T.copy into shared memory or fragments (contiguous last dim), "
                           "so the generated code uses 16-byte vector loads",
    "no_tensor_cores": "compute tiles with T.gemm on fp16/bf16 operands staged in shared memory",
    "no_shared_memory_tiling": "tile the output (e.g. 128x128 per block), T.copy A and B tiles into "
                               "T.alloc_shared buffers inside T.Pipelined over K, and T.gemm them",
    "tiny_block": "use 128-256 threads per block and tiles of 1024+ elements",
    "serial_reduction": "give the row to the whole block: T.copy or T.Parallel it into a fragment, accumulate "
                        "element-wise, and reduce once with T.reduce_sum / T.reduce_max (a warp-shuffle tree)",
    "replicated_fragment": "let T.Parallel or T.copy distribute the fragment over the threads (block_m = 1 for odd "
                           "row lengths, outer T.serial over rows, inner T.Parallel over columns) and reduce it "
                           "with T.reduce_sum instead of a T.serial loop over the fragment",
    "uncoalesced_access": "map threads to the contiguous (last) dimension: T.copy or T.Parallel over a tile of "
                          "columns, with the strided dimension in an outer T.serial loop",
    "idle_threads": "give every thread work: threads = tile elements / elements per thread (e.g. 128 threads for "
                    "a 1024-element tile with 8 per thread), or enlarge the tile",
    "no_pipelining": "iterate K with T.Pipelined(..., num_stages=2-3) so the T.copy of the next slices "
                     "(cp.async / TMA) overlaps T.gemm",
    "warp_level_mma": "use block tiles of at least 64x64 per warpgroup (e.g. block_M=128, block_N=128, 128+ "
                      "threads) so T.gemm lowers to Hopper's wgmma",
    "small_tiles": "use 128x128 or 128x256 block tiles (autotune over block_M/N/K and num_stages)",
    "dtype_round_trip": "cast once into an fp32 fragment (T.Cast / T.copy into an accum_dtype buffer) and cast "
                        "back only on the final store",
}
"""The fix for each finding code, in TileLang's terms."""


def facts(k: KernelArtifact) -> KernelFacts:
    """Facts of a TileLang kernel: the PTX's instruction mix, and what its generated CUDA shows."""
    base = dataclasses.replace(ptx_facts(k), warp_mma=warp_mma(k))
    source = k.asm.get("cuda")
    if source is None:
        return base
    lines = source.splitlines()
    return dataclasses.replace(
        base,
        serial_reduction=_serial_reduction(source),
        replicated_fragment=_replicated_fragment(source, base.threads),
        uncoalesced_access=_uncoalesced(source),
        idle_threads=_idle_threads(lines, base.threads),
        unpipelined_k_loop=_unpipelined_k_loop(lines) if TENSOR_CORE.search(k.asm.get("ptx", "")) else None,
    )


_ALL_REDUCE = re.compile(r"AllReduce|__shfl|shfl_|warp_reduce|atomicAdd|AtomicAdd|tl::reduce|cub::")
_LOCAL_ARRAY = re.compile(r"^\s*(?:float|double|half_t|bfloat16_t|half|int|float4|uint4)\s+(\w+)\[(\d+)\];")
_GLOBAL_PARAM = re.compile(r"(?:const\s+)?(\w+)\*\s*__restrict__\s+(\w+)")
_TID_TERM = re.compile(r"\(\(int\)threadIdx\.x\) \* (\w+)\)")
_ELEMENT_BYTES = {"float": 4, "half_t": 2, "bfloat16_t": 2, "double": 8, "int": 4, "int64_t": 8, "half": 2,
                  "__nv_bfloat16": 2, "float4": 16, "uint4": 16, "int8_t": 1, "uint8_t": 1, "signed char": 1}
_GEMM_CALL = re.compile(r"tl::(?:wgmma|mma|gemm)\w*|wmma::mma_sync|\bmma\.sync|wgmma\.mma_async")
_PIPELINED_LOOP = re.compile(r"cp_async|cp\.async|tma_load|mbarrier|\.wait\(")


def _serial_reduction(source: str) -> str | None:
    """A loop updating ``acc[0]`` from itself, in a kernel with no cross-thread reduction."""
    if _ALL_REDUCE.search(source):
        return None
    found = [(len(body), header, ln, m.group(1)) for header, body in c_loops(source.splitlines()) for ln in body
             if (m := re.match(r"\s*(\w+)\[0\] = .*\b\1\[0\]", ln))]
    if not found:
        return None
    _, header, ln, name = min(found, key=lambda f: f[0])  # the innermost loop around the update
    return (f"`{quote(header, 60)}` updates {name}[0] from itself every iteration (`{quote(ln, 90)}`), and no "
            f"tl::AllReduce follows: one thread walks the reduction")


def _replicated_fragment(source: str, threads: int | None) -> str | None:
    """A per-thread copy of a whole tile, filled or reduced identically by every thread of a block of 64+."""
    if not threads or threads < 64:
        return None
    lines = source.splitlines()
    params = {name for _, name in _GLOBAL_PARAM.findall(source)}
    all_reduce = _ALL_REDUCE.search(source) is not None
    for decl in lines:
        m = _LOCAL_ARRAY.match(decl)
        if not m or int(m.group(2)) < REPLICATED_MIN_ELEMENTS:
            continue
        name, length = m.group(1), int(m.group(2))
        fill = re.compile(rf"^\s*(?:\*\([\w\s*]+\)\(\s*{name}\b[^=]*|{name}\[[^=]*)=(?!=)(.*)$")
        for ln in lines:
            fills = fill.match(ln)
            if fills and "threadIdx" not in fills.group(1) \
                    and any(re.search(rf"(?<![\w.]){p}\b", fills.group(1)) for p in params):
                return (f"`{quote(decl, 40)}` per thread, filled from global memory without threadIdx "
                        f"(`{quote(ln, 100)}`): all {threads} threads load and hold the same {length} elements")
        if not all_reduce:
            for header, body in c_loops(lines):
                if re.search(rf"<\s*{length}\s*;", header) and any(
                        re.match(rf"\s*(\w+)\[0\] = .*\b\1\[0\].*\b{name}\[", b) for b in body):
                    return (f"`{quote(decl, 40)}` per thread, reduced whole by `{quote(header, 50)}` with "
                            f"no cross-thread step: all {threads} threads compute the same total")
    return None


def _uncoalesced(source: str) -> str | None:
    """``((int)threadIdx.x) * C`` in a global index with C elements >= STRIDE_MIN_BYTES apart."""
    params = {name: _ELEMENT_BYTES.get(t, 4) for t, name in _GLOBAL_PARAM.findall(source)}
    for ln in source.splitlines():
        for pointer, size in params.items():
            for index in index_expressions(ln, pointer):
                for coeff in _TID_TERM.findall(index):
                    span = int(coeff) * size if coeff.isdigit() else None
                    if span is None or span >= STRIDE_MIN_BYTES:
                        apart = f"{span} bytes" if span else f"{coeff} elements"
                        return (f"`{quote(ln, 110)}`: adjacent threads read {pointer} {apart} apart, one memory "
                                f"transaction per thread")
    return None


def _idle_threads(lines: list[str], threads: int | None) -> str | None:
    """``if (((int)threadIdx.x) < K) {`` with no else, K at most half the block's threads."""
    if not threads:
        return None
    for i, ln in enumerate(lines):
        m = re.match(r"\s*if \(\(\(int\)threadIdx\.x\) < (\d+)\) \{", ln)
        if not m or int(m.group(1)) > threads // 2:
            continue
        region = block(lines, i)
        closing = region[-1] + (lines[i + len(region)] if i + len(region) < len(lines) else "")
        if "else" not in closing:  # a warp-specialized producer/consumer split has an else branch
            return (f"`{quote(ln, 60)}` guards the work under {threads} threads per block: "
                    f"{threads - int(m.group(1))} threads idle")
    return None


def _unpipelined_k_loop(lines: list[str]) -> str | None:
    """An outer loop of tile products that copies each K slice to shared memory synchronously.

    The loop that multiplies must wait on asynchronous copies (cp.async, or TMA and its mbarriers
    in a warp-specialized kernel); an async copy elsewhere (a TMA store of C) does not pipeline it."""
    gemm_loops = [(h, body) for h, body in c_loops(lines) if any(_GEMM_CALL.search(b) for b in body)]
    # only the outermost loops are K loops: an unrolled MMA loop inside one is the same line object as a
    # line of its body (the bodies are slices of one list)
    outermost = [(h, body) for h, body in gemm_loops
                 if not any(any(h is line for line in other) for _, other in gemm_loops)]
    for header, body in outermost:
        trips = re.search(r"<\s*(\d+)\s*;", header)
        staged = any("__syncthreads" in b for b in body)  # copies into shared memory, then a barrier
        if staged and (trips is None or int(trips.group(1)) >= 2) and not any(_PIPELINED_LOOP.search(b)
                                                                               for b in body):
            return (f"`{quote(header, 60)}` copies each K slice to shared memory synchronously, then multiplies "
                    f"it: no cp.async or TMA load")
    return None
