"""CUDA kernel facts from the candidate's CUDA source and PTX, and the fix for each finding in CUDA terms.

The source is the author's own C++, so the kernel is found by name (its ``__global__``
definition) and read loosely. What is read:

=====================  =======================================================================
fact                   signal
=====================  =======================================================================
serial_reduction       a ``for`` loop adding into a float scalar, and no shuffle, barrier or
                       atomic in the kernel's PTX
uncoalesced_access     a thread index (``threadIdx.x``, or a variable set from it) times a row
                       length (a variable, or a constant >= 32) in a pointer's index
unpipelined_k_loop     the innermost PTX loop with tensor-core instructions has two barriers
                       per iteration and no cp.async anywhere (single-buffered)
=====================  =======================================================================

The instruction mix, ``warp_mma`` and dtype round trips come from the PTX (``ptx_facts``).
"""

from __future__ import annotations

import dataclasses
import re

from kernelgate.diagnosis.facts import KernelFacts
from kernelgate.dsl import ptx_facts as ptx
from kernelgate.dsl._text import c_loops, cuda_kernel_body, index_expressions, quote
from kernelgate.models import KernelArtifact

__all__ = ["facts", "HINTS"]

HINTS = {
    "scalar_global_loads": "have each thread load 16 bytes at a time (float4 / reinterpret_cast of aligned "
                           "pointers), consecutive threads on consecutive addresses",
    "no_tensor_cores": "use tensor cores (mma.sync / WMMA fragments, or wgmma on sm_90a) for the tile products",
    "no_shared_memory_tiling": "stage A and B tiles in __shared__ memory and compute a register tile per thread "
                               "from them, so each operand is read from global memory once per tile",
    "tiny_block": "launch 128-256 threads per block, each handling a vector of elements",
    "serial_reduction": "let the block's threads stride across the row with coalesced loads, then combine their "
                        "partial sums with __shfl_xor_sync within each warp and one shared-memory step across warps",
    "replicated_fragment": "give each thread its own slice of the tile (index with threadIdx.x) and combine with "
                           "shuffles",
    "uncoalesced_access": "make consecutive threads read consecutive addresses (index with threadIdx.x along the "
                          "contiguous dimension) and loop over the strided one",
    "idle_threads": "launch as many threads per block as there are elements to process in it",
    "no_pipelining": "double-buffer the shared tiles with cp.async (cuda::memcpy_async / cp.async.cg) so the next "
                     "K slice loads while the current one is multiplied",
    "warp_level_mma": "use wgmma.mma_async (CUTLASS 3 / CuTe) with 64-row warpgroup tiles instead of mma.sync/wmma",
    "small_tiles": "compute a 128x128 block tile with a register tile of 8x8 per thread",
    "dtype_round_trip": "convert each element once (static_cast<float> on load, back on store); keep intermediates "
                        "in float",
}
"""The fix for each finding code, in CUDA terms."""


def facts(k: KernelArtifact) -> KernelFacts:
    """Facts of a CUDA kernel: the PTX's instruction mix, and what its source and PTX loops show."""
    base = dataclasses.replace(ptx.ptx_facts(k), warp_mma=ptx.warp_mma(k),
                               unpipelined_k_loop=_unpipelined_k_loop(k.asm.get("ptx", ""), k.asm.get("cuda", "")))
    if "cuda" not in k.asm:
        return base
    body = cuda_kernel_body(k.asm["cuda"], k.name)
    serial = None
    if "ptx" in k.asm and not ptx.has_cross_thread_step(k.asm["ptx"]):
        serial = _serial_reduction(body)
    return dataclasses.replace(base, serial_reduction=serial, uncoalesced_access=_uncoalesced(body))


_SCALAR_UPDATE = re.compile(r"(?<![\w.\]\[])([A-Za-z_]\w*)\s*"
                            r"(?:\+=|-=|\*=|=\s*(?:fmaxf?|fminf?|max|min|fmaf?)\s*\(\s*\1\b|=\s*\1\s*[+*])")
_INTEGER_TYPE = re.compile(r"^(?:const\s+)?(?:unsigned|signed|int|long|short|char|bool|size_t|u?int\d+_t|"
                           r"(?:unsigned\s+)?(?:int|long))$")


def _float_scalar(body: list[str], name: str) -> bool:
    """``name`` is declared in the kernel as a non-integer, non-pointer, non-array value."""
    text = "\n".join(body)
    for m in re.finditer(rf"([\w:<>]+(?:\s+const)?)\s+(\*?)\s*{re.escape(name)}\s*(=|;|\[|,|\))", text):
        if m.group(2) or m.group(3) == "[":
            return False
        return not _INTEGER_TYPE.match(m.group(1)) and m.group(1) not in ("return", "else")
    return False


def _serial_reduction(body: list[str]) -> str | None:
    """A ``for`` loop adding into a float scalar (the caller has seen no cross-thread step in the PTX)."""
    for header, loop in c_loops(body):
        for m in _SCALAR_UPDATE.finditer(" ".join(loop)):
            if _float_scalar(body, m.group(1)):
                return (f"`{quote(header, 110)}` accumulates into the scalar {m.group(1)}; the kernel has no "
                        f"shuffle, barrier or atomic (PTX): each thread reduces alone")
    return None


def _uncoalesced(body: list[str]) -> str | None:
    """A thread index (``threadIdx.x``, or a variable set from it) times a row length in a pointer's index."""
    if not body:
        return None
    signature = " ".join(body[:3])
    params = [name for _, name in re.findall(r"(\w+)\s*\*\s*(?:__restrict__\s+)?(\w+)\s*[,)]", signature)]
    thread_vars = {"threadIdx.x"}
    for ln in body:  # `r = blockIdx.x * blockDim.x + threadIdx.x;`: a thread index, not divided or shifted
        if m := re.match(r"\s*(?:const\s+)?[\w:]+\s+(\w+)\s*=\s*([^;]*threadIdx\.x[^;]*);", ln):
            if not re.search(r"[/%&]|>>|<<", m.group(2)):
                thread_vars.add(m.group(1))
    tid = "|".join(re.escape(v) for v in sorted(thread_vars, key=len, reverse=True))
    term = re.compile(rf"(?<![\w.])(?:{tid})\)?\s*\*\s*(\w+)")
    for ln in body[1:]:
        for pointer in params:
            for index in index_expressions(ln, pointer):
                for stride in term.findall(index):
                    if stride.isdigit() and int(stride) < 32:
                        continue
                    return (f"`{quote(ln, 110)}`: consecutive threads index {pointer} {stride} elements apart, "
                            f"one memory transaction per thread")
    return None


def _unpipelined_k_loop(ptx_text: str, source: str) -> str | None:
    """The innermost tensor-core loop of the PTX waits on two barriers per iteration, with no cp.async anywhere."""
    if not ptx.TENSOR_CORE.search(ptx_text) or ptx.ASYNC_COPY.search(ptx_text + source):
        return None
    mma_loops = [lp for lp in ptx.loops(ptx_text) if any(ptx.TENSOR_CORE.search(x) for x in lp)]
    if not mma_loops:
        return None
    inner = min(mma_loops, key=len)
    barriers = sum(1 for x in inner if re.search(r"\bbar(?:rier)?\.sync\b", x))
    if barriers < 2:
        return None
    return (f"the mma K loop has {barriers} bar.sync per iteration and no cp.async: loads and math take turns "
            f"(single-buffered)")
